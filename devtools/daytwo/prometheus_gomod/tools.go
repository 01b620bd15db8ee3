//go:build tools

// Package tools records the main package the day-two replay's Prometheus is built from
// (devtools/daytwo/prometheus.py).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
)

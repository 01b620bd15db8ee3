//go:build tools

// Package tools records the main package `make promtool` builds (infra/promtool/build.py).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)

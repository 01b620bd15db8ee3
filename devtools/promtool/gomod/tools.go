//go:build tools

// Package tools records the main package `make promtool` builds (llmd_fleet/cli/promtool/build.py).
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)

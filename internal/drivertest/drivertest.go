//go:build linux

package drivertest

import (
	"testing"

	"github.com/csikit/csikit/csitest"
)

// Timeouts of a driver process: csitest's.
const (
	StartTimeout = csitest.StartTimeout
	StopTimeout  = csitest.StopTimeout
)

// Process is csitest.Process.
type Process = csitest.Process

// Build is csitest.Build.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	return csitest.Build(tb, pkg)
}

// Start is csitest.StartProcess.
func Start(tb testing.TB, bin string, args ...string) *Process {
	tb.Helper()
	return csitest.StartProcess(tb, bin, args...)
}

package csitest

import (
	"testing"

	"github.com/csikit/csikit/internal/testenv"
)

// StrictEnv is the environment variable that turns RequireRoot's skip into
// a failure: set it to 1 where the tests run as root with every tool
// installed (csikit's CI does), so that a test that needs root can never
// pass there by skipping.
const StrictEnv = testenv.StrictEnv

// RequireRoot skips the test unless the process runs as root, saying why
// (what the test does that needs root) — or fails it when StrictEnv is
// set (to anything but "", "0" or "false").
func RequireRoot(tb testing.TB, why string) {
	tb.Helper()
	testenv.RequireRoot(tb, why)
}

// Skip skips the test with reason, or fails it when StrictEnv is set: for
// a prerequisite the machine lacks (a device, a kernel feature the test
// found missing) that CI provides.
func Skip(tb testing.TB, reason string) {
	tb.Helper()
	testenv.Skip(tb, reason)
}

// RequireCommand skips the test (or fails it under StrictEnv) unless the
// command name is on PATH; pkg names the Debian package that installs it.
func RequireCommand(tb testing.TB, name, pkg string) {
	tb.Helper()
	testenv.RequireCommand(tb, name, pkg)
}

// SkipWithoutKernelOption skips the test when /proc/config.gz shows the
// running kernel was built without the option name (e.g.
// "CONFIG_XFS_QUOTA"), even under StrictEnv: no package installs it.
// Without /proc/config.gz the test goes on.
func SkipWithoutKernelOption(tb testing.TB, name, reason string) {
	tb.Helper()
	testenv.SkipWithoutKernelOption(tb, name, reason)
}

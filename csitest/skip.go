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

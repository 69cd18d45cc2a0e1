//go:build linux

package main_test

import (
	"os"
	"testing"

	"github.com/csikit/csikit/internal/testenv"
)

// needRoot skips (or fails under CSIKIT_STRICT_TESTS) without root.
func needRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(tb, "needs root: the driver mounts and attaches loop devices")
	}
}

// shortDir is a temporary directory with a short path (unix socket paths
// are limited to 108 bytes), removed at the end of the test.
func shortDir(tb testing.TB, prefix string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

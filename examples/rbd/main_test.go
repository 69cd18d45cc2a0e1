//go:build linux

package main_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/csikit/csikit/csitest/vmtest"
)

// TestMain removes the driver binary driverBinary built, if any.
// As a watch helper (watchHelperEnv) it only watches.
func TestMain(m *testing.M) {
	if spec := os.Getenv(watchHelperEnv); spec != "" {
		os.Exit(watchHelper(spec))
	}
	code := vmtest.Main(m) // powers off the VM of TestKernelMappers
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

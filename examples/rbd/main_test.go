//go:build linux

package main_test

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the driver binary driverBinary built, if any.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

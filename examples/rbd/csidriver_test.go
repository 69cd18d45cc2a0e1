//go:build linux

package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestDeployedCSIDriverIsGenerated: deploy/csidriver.yaml is what
// --print-csidriver prints (regenerate it when this fails), and printing
// touches neither a cluster nor the state directory.
func TestDeployedCSIDriverIsGenerated(t *testing.T) {
	bin := driverBinary(t)
	state := filepath.Join(t.TempDir(), "never-created")
	out, err := exec.Command(bin, "--print-csidriver", "--state-dir", state).Output()
	if err != nil {
		t.Fatalf("--print-csidriver: %v", err)
	}
	deployed, err := os.ReadFile("deploy/csidriver.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, body, ok := bytes.Cut(deployed, []byte("\napiVersion:")); !ok || !bytes.Equal(append([]byte("apiVersion:"), body...), out) {
		t.Errorf("deploy/csidriver.yaml differs from what --print-csidriver prints; regenerate it:\n%s", out)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("--print-csidriver created the state directory (%v)", err)
	}
}

//go:build linux

package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runUntilServing starts the binary with args, waits for its socket under
// dir, stops it with SIGTERM and returns everything it wrote to stderr.
func runUntilServing(t *testing.T, bin, sock string, args ...string) string {
	t.Helper()
	var stderr strings.Builder
	cmd := exec.Command(bin, append([]string{"--endpoint", "unix://" + sock}, args...)...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("driver socket never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	stopped = true
	if err != nil {
		t.Fatalf("driver exit after SIGTERM: %v\n%s", err, stderr.String())
	}
	return stderr.String()
}

// TestStartupSaysWhereStateIsKept: a newcomer's first run says where the
// state directory is, that it outlives the driver and how to remove it;
// a second run says it reused it. And a filesystem without project quotas
// (the usual host, and the state directory here on a plain tmpfs) is
// reported at INFO with how to enable them, not as a WARN that reads like
// a fault.
func TestStartupSaysWhereStateIsKept(t *testing.T) {
	needRoot(t)
	bin := buildHostpath(t)
	dir := shortDir(t, "hpst")
	// tmpfs has no project quotas on any kernel: the case under test.
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	state := filepath.Join(dir, "state")
	sock := filepath.Join(dir, "csi.sock")
	args := []string{"--nodeid", "startup-node", "--state-dir", state}

	first := runUntilServing(t, bin, sock, args...)
	for _, want := range []string{
		"state directory " + state + " (created)",
		"stay there after the driver stops",
		"rm -r " + state,
	} {
		if !strings.Contains(first, want) {
			t.Errorf("first run's output lacks %q:\n%s", want, first)
		}
	}
	if strings.Contains(first, "choose another with --state-dir") {
		t.Errorf("the --state-dir hint shows although --state-dir was given:\n%s", first)
	}
	var quotaLine string
	for _, l := range strings.Split(first, "\n") {
		if strings.Contains(l, "capacity is accounted but not enforced") {
			quotaLine = l
		}
	}
	if !strings.Contains(quotaLine, "level=INFO") || !strings.Contains(quotaLine, "prjquota") {
		t.Errorf("the no-project-quota line is %q, want it at INFO, saying how to enable them; output:\n%s", quotaLine, first)
	}
	if strings.Contains(first, "level=WARN") || strings.Contains(first, "level=ERROR") {
		t.Errorf("a first run on a plain filesystem warns:\n%s", first)
	}

	second := runUntilServing(t, bin, sock, args...)
	if want := "state directory " + state + " (reused from an earlier run)"; !strings.Contains(second, want) {
		t.Errorf("second run's output lacks %q:\n%s", want, second)
	}
}

package kube_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/csikit/csikit/sanity/kube"
)

func alive(pid int) bool {
	// Signal 0 checks existence; a reaped child is gone (ESRCH).
	return syscall.Kill(pid, 0) == nil
}

func TestProcessRestartAndStop(t *testing.T) {
	p, err := kube.StartProcess(kube.ProcessOptions{
		Name: "sleeper", Path: "/bin/sleep", Args: []string{"600"},
		LogDir: t.TempDir(), Restart: true, StopGrace: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	first := p.PID()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	kube.WaitFor(t, 10*time.Second, "restart after a crash", func(context.Context) (bool, string, error) {
		return p.Starts() == 2 && p.Running(), "", nil
	})
	second := p.PID()
	if second == first {
		t.Fatalf("got the same PID %d after a restart, want a new one", first)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if alive(first) || alive(second) {
		t.Errorf("after Stop: got pids %d alive %v, %d alive %v, want both gone", first, alive(first), second, alive(second))
	}
	if p.Running() {
		t.Error("Running after Stop: got true, want false")
	}
	if p.Starts() != 2 {
		t.Errorf("Starts after Stop: got %d, want 2 (no restart after Stop)", p.Starts())
	}
}

// A process that ignores SIGTERM is killed after the grace period.
func TestProcessStopEscalatesToSIGKILL(t *testing.T) {
	dir := t.TempDir()
	trapped := filepath.Join(dir, "trapped")
	p, err := kube.StartProcess(kube.ProcessOptions{
		Name: "stubborn", Path: "/bin/sh",
		Args:   []string{"-c", `trap '' TERM; : >"$1"; while :; do sleep 0.1; done`, "sh", trapped},
		LogDir: dir, StopGrace: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Stop only once the shell ignores SIGTERM: it says so with a file (a
	// fixed sleep here was too short on a loaded machine, and SIGTERM
	// then ended the shell at once).
	if err := kube.Poll(context.Background(), time.Minute, func(context.Context) (bool, string, error) {
		_, err := os.Stat(trapped)
		return err == nil, "the shell's trap", nil
	}); err != nil {
		t.Fatal(err)
	}
	pid := p.PID()
	start := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("pid %d alive after Stop, want killed", pid)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("Stop returned after %s, want SIGKILL only after the grace period", d)
	}
}

func TestStartProcessValidates(t *testing.T) {
	if _, err := kube.StartProcess(kube.ProcessOptions{Name: "x"}); err == nil {
		t.Error("StartProcess without Path and LogDir: got nil error, want one")
	}
	_, err := kube.StartProcess(kube.ProcessOptions{Name: "x", Path: "/nonexistent/bin", LogDir: t.TempDir()})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("StartProcess of a missing binary: got %v, want ErrNotExist", err)
	}
}

func TestPoll(t *testing.T) {
	n := 0
	err := kube.Poll(context.Background(), 5*time.Second, func(context.Context) (bool, string, error) {
		n++
		return n == 3, "counting", nil
	})
	if err != nil || n != 3 {
		t.Errorf("Poll: got n=%d err=%v, want n=3 and nil", n, err)
	}
	err = kube.Poll(context.Background(), 250*time.Millisecond, func(context.Context) (bool, string, error) {
		return false, "never", nil
	})
	if err == nil {
		t.Error("Poll of a never-true condition: got nil, want a timeout error")
	}
}

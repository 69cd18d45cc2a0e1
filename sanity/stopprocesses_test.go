//go:build linux

package sanity_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/sanity"
)

// procState is the state letter of /proc/PID/stat (T: stopped).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

func waitState(t *testing.T, pid int, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for procState(t, pid) != want {
		if time.Now().After(deadline) {
			t.Fatalf("process %d in state %s, want %s", pid, procState(t, pid), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StopProcesses stops processes by PID and by name and resumes them; a
// name that matches nothing is an error, not an empty freeze.
func TestStopProcesses(t *testing.T) {
	// A copy of sleep under a name of its own: the name matches only
	// this process (never another user's sleep).
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	name := "sbstop" + strconv.Itoa(os.Getpid()%100000)
	bin := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	for _, target := range []string{strconv.Itoa(pid), name} {
		resume, err := sanity.StopProcesses(target)(context.Background())
		if err != nil {
			t.Fatalf("StopProcesses(%s): %v", target, err)
		}
		waitState(t, pid, "T")
		if err := resume(); err != nil {
			t.Fatal(err)
		}
		waitState(t, pid, "S")
	}
	if _, err := sanity.StopProcesses("no-such-process-name")(context.Background()); err == nil || !strings.Contains(err.Error(), "no process named no-such-process-name") {
		t.Fatalf("StopProcesses of a missing name: %v, want an error naming it", err)
	}
}

//go:build linux

package csitest_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/csikit/csikit/csitest"
)

// TestRequireRootStrict runs this test binary again as an unprivileged
// user: RequireRoot skips there, and under CSIKIT_STRICT_TESTS=1 fails
// instead, so CI that runs as root cannot go green by skipping.
func TestRequireRootStrict(t *testing.T) {
	if os.Getenv("CSITEST_CHILD") == "1" {
		csitest.RequireRoot(t, "the child's reason")
		return
	}
	csitest.RequireRoot(t, "the child runs as nobody")
	// A copy of the test binary nobody can execute.
	// (Not t.TempDir: its parent is private to root.)
	dir, err := os.MkdirTemp("", "csitest-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "csitest.test")
	copyFile(t, os.Args[0], bin)
	for _, strict := range []string{"", "1"} {
		cmd := exec.Command(bin, "-test.run=^TestRequireRootStrict$", "-test.v")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CSITEST_CHILD=1", csitest.StrictEnv+"="+strict)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		switch {
		case strict == "" && (err != nil || !strings.Contains(string(out), "--- SKIP") || !strings.Contains(string(out), "needs root: the child's reason")):
			t.Errorf("as nobody, not strict: %v, want a skip naming the reason:\n%s", err, out)
		case strict == "1" && (err == nil || !strings.Contains(string(out), "--- FAIL") || !strings.Contains(string(out), "needs root: the child's reason")):
			t.Errorf("as nobody, %s=1: %v, want a failure naming the reason:\n%s", csitest.StrictEnv, err, out)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

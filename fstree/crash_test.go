//go:build linux

package fstree_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/csikit/csikit/fstree"
)

// copyChild runs Copy for the parent test when childEnv is set.
func copyChild() bool {
	v := os.Getenv(childEnv)
	if v == "" {
		return false
	}
	src, dst, _ := strings.Cut(v, "\n")
	if _, err := fstree.Copy(context.Background(), src, dst, fstree.CopyOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// TestCopyKilledMidway kills a process with SIGKILL in the middle of a
// Copy. Nothing may appear at dst; the next Copy to the same dst clears
// what the dead one left and succeeds.
func TestCopyKilledMidway(t *testing.T) {
	d := t.TempDir()
	src := filepath.Join(d, "src")
	const files = 3000
	for i := range files {
		write(t, filepath.Join(src, fmt.Sprintf("d%02d/f%04d", i%50, i)), strings.Repeat("k", 4096), 0o644)
	}
	dst := filepath.Join(d, "dst")
	partial := filepath.Join(d, ".dst.fstree-partial")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+src+"\n"+dst)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ents, _ := os.ReadDir(partial)
		if len(ents) > 0 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal("the child never started copying")
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("child was not killed mid-copy (it finished first: %v); make the tree larger", err)
	}
	wantMissing(t, dst)
	if _, err := os.Lstat(partial); err != nil {
		t.Fatalf("the killed copy left no partial tree (%v): was it killed mid-copy?", err)
	}

	stats, err := fstree.Copy(context.Background(), src, dst, fstree.CopyOptions{})
	if err != nil {
		t.Fatalf("Copy after the crash: %v", err)
	}
	if stats.Files != files {
		t.Fatalf("copied %d files, want %d", stats.Files, files)
	}
	wantMissing(t, partial)
	wantContent(t, filepath.Join(dst, "d07/f2957"), strings.Repeat("k", 4096))
}

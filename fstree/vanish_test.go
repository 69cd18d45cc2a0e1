//go:build linux

package fstree_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/fstree"
)

// vanishTree makes a tree of 10,000 small files in 100 directories (the
// issue's report had 20,000).
func vanishTree(t *testing.T, root string) int64 {
	t.Helper()
	const dirs, per = 100, 100
	for i := range dirs {
		for j := range per {
			write(t, filepath.Join(root, fmt.Sprintf("d%03d/f%03d", i, j)), "snapshot data", 0o644)
		}
	}
	return dirs * per
}

// copyWhileRemoved copies src to dst and, as soon as the copy has made
// its first entry, removes src (all of it, far faster than the copy).
func copyWhileRemoved(t *testing.T, src, dst string, opts fstree.CopyOptions) (fstree.CopyStats, error) {
	t.Helper()
	type result struct {
		stats fstree.CopyStats
		err   error
	}
	done := make(chan result, 1)
	go func() {
		stats, err := fstree.Copy(context.Background(), src, dst, opts)
		done <- result{stats, err}
	}()
	partial := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".fstree-partial")
	for {
		if ents, _ := os.ReadDir(partial); len(ents) > 0 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the copy ended (%v) before the removal could start: make the tree larger", r.err)
		default:
		}
		time.Sleep(100 * time.Microsecond)
	}
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	r := <-done
	return r.stats, r.err
}

// TestCopyFailsWhenSourceVanishes restores from a source that is deleted
// mid-copy (a snapshot deleted during a restore, as a group snapshot delete
// did): Copy must fail with Aborted naming what vanished and leave nothing
// at dst, never report success on a partial copy.
func TestCopyFailsWhenSourceVanishes(t *testing.T) {
	d := tmpfs(t, "", "64m")
	src, dst := filepath.Join(d, "snap"), filepath.Join(d, "restored")
	total := vanishTree(t, src)
	stats, err := copyWhileRemoved(t, src, dst, fstree.CopyOptions{})
	switch status.Code(err) {
	case codes.Aborted:
		mustContain(t, err, "vanished from the source")
		if msg := err.Error(); strings.Contains(msg, src+"/d") {
			t.Errorf("the message names the vanished entry by its full path, want it relative to the source: %v", err)
		}
	case codes.OK:
		t.Fatalf("Copy of a source being deleted succeeded with %d of %d files", stats.Files, total)
	default:
		t.Fatalf("Copy: got %v, want Aborted", err)
	}
	wantMissing(t, dst)
	wantMissing(t, filepath.Join(d, ".restored.fstree-partial"))
}

// TestCopySkipVanished copies a tree losing entries with SkipVanished, as
// a clone of a live volume does: what is left is copied, and Copy
// succeeds.
func TestCopySkipVanished(t *testing.T) {
	d := tmpfs(t, "", "64m")
	src, dst := filepath.Join(d, "live"), filepath.Join(d, "clone")
	total := vanishTree(t, src)
	stats, err := copyWhileRemoved(t, src, dst, fstree.CopyOptions{SkipVanished: true})
	if err != nil {
		t.Fatalf("Copy with SkipVanished: %v", err)
	}
	if stats.Files >= total {
		t.Fatalf("copied %d of %d files although the source was being removed", stats.Files, total)
	}
	if _, err := os.Stat(dst); err != nil {
		t.Fatal(err)
	}
}

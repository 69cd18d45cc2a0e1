//go:build linux

package fstree_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/fstree"
	"github.com/csikit/csikit/internal/testenv"
)

// cancelAfter is a context whose Err turns to Canceled after n calls, so
// a test cancels a walk in its middle without timing.
type cancelAfter struct {
	context.Context
	n atomic.Int64
}

func (c *cancelAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func TestCancelMidWalk(t *testing.T) {
	d := t.TempDir()
	src := filepath.Join(d, "src")
	for i := range 1000 {
		write(t, filepath.Join(src, fmt.Sprintf("d%d/f%d", i%10, i)), "data", 0o644)
	}
	ctx := &cancelAfter{Context: context.Background()}
	ctx.n.Store(5)
	dst := filepath.Join(d, "dst")
	_, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{})
	testenv.WantCode(t, err, codes.Canceled)
	wantMissing(t, dst) // the partial copy is removed even though ctx is done

	// Remove first looks for mounts below (about 16 context checks for
	// these 1010 entries, one per 64) and then removes (as many again):
	// 24 checks lands the cancel in the removal's middle.
	ctx.n.Store(24)
	err = fstree.Remove(ctx, src, fstree.RemoveOptions{})
	testenv.WantCode(t, err, codes.Canceled)
	left := 0
	for i := range 10 {
		ents, _ := os.ReadDir(filepath.Join(src, fmt.Sprintf("d%d", i)))
		left += len(ents)
	}
	if left == 0 || left == 1000 {
		t.Fatalf("%d of 1000 files left after a cancel in mid-walk, want some removed and some left", left)
	}

	ctx.n.Store(2)
	_, err = fstree.Usage(ctx, src)
	testenv.WantCode(t, err, codes.Canceled)
}

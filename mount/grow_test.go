//go:build linux

package mount_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/mount"
)

// TestStageGrowsOffline: a volume whose device grew while it was not staged
// (ControllerExpandVolume between two pods) is staged with a file system
// that fills the device when StageOptions.Grow is set — resize2fs on the
// unmounted file system, which needs no CAP_SYS_RESOURCE, unlike growing
// it once mounted — and keeps its data; without Grow, and read-only, the
// file system keeps its size.
func TestStageGrowsOffline(t *testing.T) {
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	requireTool(t, "resize2fs", "e2fsprogs")
	requireTool(t, "e2fsck", "e2fsprogs")
	const size = 32 << 20
	dev, file := loopDevice(t, size)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	staging := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, staging)
	stage := func(o mount.StageOptions) int64 {
		t.Helper()
		o.Device, o.Target = dev, staging
		if err := m.Stage(ctx, o); err != nil {
			t.Fatal(err)
		}
		n := fsSize(t, staging)
		if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: staging, Grow: true}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(staging, "data"), "precious")
	before := fsSize(t, staging)
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := os.Truncate(file, 2*size); err != nil {
		t.Fatal(err)
	}
	if err := block.RefreshLoopSize(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if got := stage(mount.StageOptions{}); got != before {
		t.Errorf("file system size staged without Grow: got %d, want %d (unchanged)", got, before)
	}
	if got := stage(mount.StageOptions{Grow: true, ReadOnly: true}); got != before {
		t.Errorf("file system size staged read-only with Grow: got %d, want %d (unchanged)", got, before)
	}
	if err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: staging, Grow: true}); err != nil {
		t.Fatal(err)
	}
	if after := fsSize(t, staging); after < before+size*9/10 {
		t.Errorf("file system size staged with Grow: got %d, %d before, want about %d more", after, before, size)
	}
	wantFile(t, filepath.Join(staging, "data"), "precious")
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
	// Full size already: staged again with Grow, nothing to do.
	if got := stage(mount.StageOptions{Grow: true}); got < before+size*9/10 {
		t.Errorf("file system size restaged with Grow: got %d, want about %d", got, before+size)
	}
}

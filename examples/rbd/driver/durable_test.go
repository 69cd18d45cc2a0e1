//go:build linux

package driver_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
)

// loopExt4 mounts a fresh ext4 file system (on a loop device over a file
// in dir) at dir/mnt and returns the mount point and the backing file;
// cleanup unmounts it (which detaches the loop device).
func loopExt4(t *testing.T, dir string) (string, string) {
	t.Helper()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	for _, args := range [][]string{{"mkfs.ext4", "-q", "-F", img}, {"mount", "-o", "loop", img, mnt}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", mnt, err, out)
		}
	})
	return mnt, img
}

// TestStageRecordDurable: NodeStageVolume answers only once its stage
// record (the only way NodeUnstageVolume, after a crash or a power cut,
// finds the mapping to undo) is on disk. The state directory is an ext4
// file system on a loop device; right after the answer the device's
// contents are copied, as a power cut would leave them, and mounted: the
// record must be there, whole. The same after NodeUnstageVolume: the
// record must be gone.
func TestStageRecordDurable(t *testing.T) {
	c := cephtest.Require(t)
	cephtest.RequireRoot(t)
	for _, tool := range []string{"rbd-fuse", "mkfs.ext4"} {
		if _, err := exec.LookPath(tool); err != nil {
			cephtest.Skipf(t, "needs %s", tool)
		}
	}
	dir := t.TempDir()
	state, img := loopExt4(t, filepath.Join(dir, "state"))
	d := newDriver(t, c, driver.Options{Mapper: driver.MapperFUSE, StateDir: state})
	vol := blockVolume(t, d, c, nil)
	t.Cleanup(func() {
		_, _ = d.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: vol, Secrets: c.Secrets()})
	})
	ctx := context.Background()
	staging := filepath.Join(dir, "staging")
	if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: staging, VolumeCapability: blockCap, Secrets: c.Secrets()}); err != nil {
		t.Fatal(err)
	}
	unstaged := false
	t.Cleanup(func() {
		if !unstaged {
			_, _ = d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging})
		}
	})
	record := filepath.Join("staged", vol+".json")
	crashed := func(name string) string {
		b, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		cp := filepath.Join(dir, name+".img")
		if err := os.WriteFile(cp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		mnt := filepath.Join(dir, name)
		if err := os.MkdirAll(mnt, 0o700); err != nil {
			t.Fatal(err)
		}
		// Mounting replays the journal, as the boot after the cut would.
		if out, err := exec.Command("mount", "-o", "loop", cp, mnt).CombinedOutput(); err != nil {
			t.Fatalf("mount the copy: %v\n%s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
		return mnt
	}
	after := crashed("after-stage")
	b, err := os.ReadFile(filepath.Join(after, record))
	if err != nil {
		t.Fatalf("after a power cut right after NodeStageVolume answered: %v", err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil || rec["image"] == nil {
		t.Fatalf("after a power cut right after NodeStageVolume answered, the stage record is %q (%v)", b, err)
	}
	if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	unstaged = true
	after = crashed("after-unstage")
	if _, err := os.Stat(filepath.Join(after, record)); !os.IsNotExist(err) {
		t.Fatalf("after a power cut right after NodeUnstageVolume answered, the stage record is still there (%v): a restarted node would look for a mapping that is gone", err)
	}
}

//go:build linux

package driver_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/hostpath/driver"
)

// fsSize is the size of the filesystem mounted at path (statfs).
func fsSize(t *testing.T, path string) int64 {
	t.Helper()
	var sfs unix.Statfs_t
	if err := unix.Statfs(path, &sfs); err != nil {
		t.Fatal(err)
	}
	return int64(sfs.Blocks) * sfs.Bsize
}

// fsckClean runs a read-only full check of the ext4 filesystem in img.
func fsckClean(t *testing.T, img string) {
	t.Helper()
	if out, err := exec.Command("e2fsck", "-f", "-n", img).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -f -n %s: %v\n%s", img, err, out)
	}
}

// TestStageGrowsAfterStagedExpand: a filesystem volume expanded on the
// controller while staged, then unstaged and staged again (Kubernetes'
// "pod is re-created on the same node after controller resize is
// finished"), comes back with a filesystem as large as the volume and its
// data, and NodeExpandVolume then succeeds with nothing to do. ext4 grows
// at the stage before the mount (offline: no CAP_SYS_RESOURCE, which
// growing a mounted ext4 needs and this sandbox lacks); xfs, which grows
// only mounted, right after the mount (xfs_growfs: CAP_SYS_ADMIN).
func TestStageGrowsAfterStagedExpand(t *testing.T) {
	needRoot(t)
	f := newNodeFixture(t, "hpsg", "", driver.Options{})
	s := f.s
	ctx := context.Background()
	for _, k := range []struct {
		fs, pkg, grow string
		small, large  int64
	}{{"ext4", "e2fsprogs", "resize2fs", 16 << 20, 64 << 20}, {"xfs", "xfsprogs", "xfs_growfs", 300 << 20, 600 << 20}} {
		t.Run(k.fs, func(t *testing.T) {
			csitest.RequireCommand(t, "mkfs."+k.fs, k.pkg)
			csitest.RequireCommand(t, k.grow, k.pkg)
			v := f.vol(t, "sg-"+k.fs, k.small, k.fs, nil, k.fs)
			if err := v.stage(ctx); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(v.staging, "kept"), []byte("before the resize"), 0o600); err != nil {
				t.Fatal(err)
			}
			r, err := s.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: v.id,
				CapacityRange: &csi.CapacityRange{RequiredBytes: k.large}, VolumeCapability: v.stageReq.VolumeCapability})
			if err != nil || !r.GetNodeExpansionRequired() {
				t.Fatalf("ControllerExpandVolume while staged: %v, %v (want the node step)", r, err)
			}
			if err := v.unstage(ctx); err != nil {
				t.Fatal(err)
			}
			if err := v.stage(ctx); err != nil {
				t.Fatalf("stage after a controller resize: %v", err)
			}
			if got := fsSize(t, v.staging); got < k.large*85/100 { // xfs's log is outside the count
				t.Errorf("staged after the controller resize: a %d-byte filesystem, want about the volume's %d (it was %d)", got, k.large, k.small)
			}
			if _, err := s.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: v.id, VolumePath: v.staging,
				StagingTargetPath: v.staging, CapacityRange: &csi.CapacityRange{RequiredBytes: k.large}}); err != nil {
				t.Errorf("NodeExpandVolume after the stage: %v", err)
			}
			if got := fsSize(t, v.staging); got < k.large*85/100 { // xfs's log is outside the count
				t.Errorf("after NodeExpandVolume: a %d-byte filesystem, want about the volume's %d", got, k.large)
			}
			if b, err := os.ReadFile(filepath.Join(v.staging, "kept")); err != nil || string(b) != "before the resize" {
				t.Errorf("the file written before the resize: %q, %v", b, err)
			}
			if err := v.unstage(ctx); err != nil {
				t.Fatal(err)
			}
			if k.fs == "ext4" {
				fsckClean(t, v.img)
			}
		})
	}
}

// fillUp fills the filesystem holding dir with a file until ENOSPC and
// returns the file (removing it frees the space).
func fillUp(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = 0xa5
	}
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for { // the last partial megabyte
		if _, err := f.Write(buf[:4096]); err != nil {
			break
		}
	}
	t.Cleanup(func() { os.Remove(p) })
	return p
}

// TestOfflineGrowOnFullDisk: resize2fs growing an unmounted ext4 volume
// writes the new groups' metadata into the backing file's holes, so a full
// state filesystem fails it with ENOSPC — in ControllerExpandVolume of an
// unstaged volume, and in NodeStageVolume after an expansion made while
// staged. Each fails with RESOURCE_EXHAUSTED and leaves the volume as it
// was: its recorded capacity and backing file size, an intact filesystem,
// no loop device, mount or staged marker. Once space is freed, the same
// calls succeed and the data is there.
func TestOfflineGrowOnFullDisk(t *testing.T) {
	needRoot(t)
	csitest.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
	csitest.RequireCommand(t, "resize2fs", "e2fsprogs")
	// The capacity is not the tmpfs's: the volume's file is sparse.
	f := newNodeFixture(t, "hpgf", "48m", driver.Options{Capacity: 4 << 30})
	s, state := f.s, f.state
	ctx := context.Background()
	const small, large = 16 << 20, 1 << 30
	v := f.vol(t, "full", small, "ext4", nil, "staging")
	id, img, staging := v.id, v.img, v.staging
	expand := func(size int64) error {
		_, err := s.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id,
			CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: v.stageReq.VolumeCapability})
		return err
	}
	capacity := func() int64 {
		t.Helper()
		r, err := s.ctl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: id})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetVolume().GetCapacityBytes()
	}
	imgSize := func() int64 {
		t.Helper()
		fi, err := os.Stat(img)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if err := v.stage(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(staging, "kept"), []byte("before the full disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := v.unstage(ctx); err != nil {
		t.Fatal(err)
	}

	t.Run("controller", func(t *testing.T) {
		filler := fillUp(t, state)
		err := expand(large)
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("ControllerExpandVolume of an unstaged volume on a full disk: %v, want RESOURCE_EXHAUSTED", err)
		}
		if got := capacity(); got != small {
			t.Errorf("capacity after the failed expansion: %d, want %d", got, small)
		}
		if got := imgSize(); got != small {
			t.Errorf("backing file after the failed expansion: %d bytes, want %d", got, small)
		}
		v.checkUnstaged(t, ctx, "after the failed expansion")
		os.Remove(filler)
		fsckClean(t, img)
		if err := expand(large / 2); err != nil {
			t.Fatalf("ControllerExpandVolume with space again: %v", err)
		}
	})

	t.Run("stage", func(t *testing.T) {
		if err := v.stage(ctx); err != nil {
			t.Fatal(err)
		}
		if got := fsSize(t, staging); got < large/2*9/10 {
			t.Errorf("staged after the offline growth: %d bytes, want about %d", got, large/2)
		}
		if err := expand(large); err != nil { // while staged: the node grows it
			t.Fatal(err)
		}
		if err := v.unstage(ctx); err != nil {
			t.Fatal(err)
		}
		filler := fillUp(t, state)
		err := v.stage(ctx)
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("NodeStageVolume growing the filesystem on a full disk: %v, want RESOURCE_EXHAUSTED", err)
		}
		v.checkUnstaged(t, ctx, "after the failed stage")
		os.Remove(filler)
		fsckClean(t, img)
		if err := v.stage(ctx); err != nil {
			t.Fatalf("stage with space again: %v", err)
		}
		if got := fsSize(t, staging); got < large*9/10 {
			t.Errorf("staged with space again: %d bytes, want about %d", got, large)
		}
		if b, err := os.ReadFile(filepath.Join(staging, "kept")); err != nil || string(b) != "before the full disk" {
			t.Errorf("the file written before: %q, %v", b, err)
		}
		if err := v.unstage(ctx); err != nil {
			t.Fatal(err)
		}
		fsckClean(t, img)
	})
}

// TestXFSRestoreFillsTheLargerVolume: an xfs volume restored from a
// snapshot, or cloned, into a larger capacity stages with a filesystem as
// large as the new volume (Kubernetes' "should provision correct
// filesystem size when restoring snapshot to larger size pvc"; kubelet
// sends no NodeExpandVolume for a new claim). xfs cannot grow offline, so
// the stage grows it right after the mount.
func TestXFSRestoreFillsTheLargerVolume(t *testing.T) {
	needRoot(t)
	csitest.RequireCommand(t, "mkfs.xfs", "xfsprogs")
	csitest.RequireCommand(t, "xfs_growfs", "xfsprogs")
	newNodeFixture(t, "hpxr", "", driver.Options{}).checkCopiesFill(t, "xr", "xfs", 300<<20, 700<<20, 85)
}

// TestXFSGrowAtStageOnFullDisk: the xfs_growfs a stage runs after the
// mount (an expansion made while staged) writes the new allocation
// groups' headers into the backing file's holes; on a full state
// filesystem it fails, and the stage fails with it (RESOURCE_EXHAUSTED,
// not INTERNAL as at first) leaving nothing — no
// mount, no loop device, no staged marker — and an intact filesystem.
// Once space is freed, the stage grows it.
func TestXFSGrowAtStageOnFullDisk(t *testing.T) {
	needRoot(t)
	csitest.RequireCommand(t, "mkfs.xfs", "xfsprogs")
	csitest.RequireCommand(t, "xfs_growfs", "xfsprogs")
	csitest.RequireCommand(t, "xfs_repair", "xfsprogs")
	f := newNodeFixture(t, "hpxf", "160m", driver.Options{Capacity: 8 << 30}) // mkfs.xfs writes its whole log
	ctx := context.Background()
	const small, large = 300 << 20, 4 << 30
	v := f.vol(t, "xfull", small, "xfs", nil, "staging")
	if err := v.stage(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v.staging, "kept"), []byte("before the full disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: v.id,
		CapacityRange: &csi.CapacityRange{RequiredBytes: large}, VolumeCapability: v.stageReq.VolumeCapability}); err != nil {
		t.Fatal(err)
	}
	if err := v.unstage(ctx); err != nil {
		t.Fatal(err)
	}
	filler := fillUp(t, f.state)
	if err := v.stage(ctx); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a stage that grows xfs on a full disk: %v, want RESOURCE_EXHAUSTED", err)
	}
	v.checkUnstaged(t, ctx, "after the failed stage")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("xfs_repair", "-n", v.img).CombinedOutput(); err != nil {
		t.Errorf("xfs_repair -n after the failed stage: %v\n%s", err, out)
	}
	if err := v.stage(ctx); err != nil {
		t.Fatalf("stage with space again: %v", err)
	}
	if got := fsSize(t, v.staging); got < large*85/100 {
		t.Errorf("staged with space again: %d bytes, want about %d", got, large)
	}
	if b, err := os.ReadFile(filepath.Join(v.staging, "kept")); err != nil || string(b) != "before the full disk" {
		t.Errorf("the file written before: %q, %v", b, err)
	}
	if err := v.unstage(ctx); err != nil {
		t.Fatal(err)
	}
}

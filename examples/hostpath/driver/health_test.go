//go:build linux

package driver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/hostpath/driver"
)

// healthOf returns the volume's conditions as sorted "STATUS/Reason"
// strings, from NodeGetVolumeHealth (with the paths given) and — for the
// backend conditions, which need no path — ControllerGetVolumeHealth.
func healthOf(t *testing.T, s *served, id, staging, target string) (node, ctl string) {
	t.Helper()
	ctx := context.Background()
	nr, err := s.node.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: id, StagingTargetPath: staging, VolumePublishPath: target})
	if err != nil {
		t.Fatalf("NodeGetVolumeHealth: %v", err)
	}
	cr, err := s.ctl.ControllerGetVolumeHealth(ctx, &csi.ControllerGetVolumeHealthRequest{VolumeId: id})
	if err != nil {
		t.Fatalf("ControllerGetVolumeHealth: %v", err)
	}
	list := func(h *csi.VolumeHealth) string {
		var out []string
		for _, e := range h.GetHealthStatuses() {
			out = append(out, e.GetStatus().String()+"/"+e.GetReason())
		}
		sort.Strings(out)
		return strings.Join(out, ",")
	}
	return list(nr.GetVolumeHealth()), list(cr.GetVolumeHealth())
}

func wantHealth(t *testing.T, s *served, id, staging, target, wantNode, wantCtl string) {
	t.Helper()
	node, ctl := healthOf(t, s, id, staging, target)
	if node != wantNode {
		t.Errorf("NodeGetVolumeHealth: got %q, want %q", node, wantNode)
	}
	if ctl != wantCtl {
		t.Errorf("ControllerGetVolumeHealth: got %q, want %q", ctl, wantCtl)
	}
}

// stagePublish stages and publishes a volume, undone at cleanup.
func stagePublish(t *testing.T, s *served, dir, id string, c *csi.VolumeCapability) (staging, target string) {
	t.Helper()
	ctx := context.Background()
	staging, target = filepath.Join(dir, "staging-"+id), filepath.Join(dir, "target-"+id)
	unmountAtCleanup(t, target, staging)
	if _, err := s.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: c}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: c}); err != nil {
		t.Fatal(err)
	}
	return staging, target
}

// TestVolumeHealth: one test per condition the backend can be in. Each
// starts from a healthy volume (no condition reported), breaks it the way
// a failing node would, and expects the condition from NodeGetVolumeHealth
// and ControllerGetVolumeHealth.
func TestVolumeHealth(t *testing.T) {
	needRoot(t)
	dir := shortDir(t, "hphl")
	state := filepath.Join(dir, "state")
	s := serve(t, dir, driver.Options{StateDir: state})
	ctx := context.Background()

	t.Run("directory data missing", func(t *testing.T) {
		id := createVol(t, s, "dir-missing", 1<<20, capFor(false, ""), nil)
		staging, target := stagePublish(t, s, dir, id, capFor(false, ""))
		wantHealth(t, s, id, staging, target, "", "")
		data := filepath.Join(state, "volumes", id)
		if err := os.Rename(data, data+".moved"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Rename(data+".moved", data) })
		wantHealth(t, s, id, staging, target, "DATA_LOSS/DataMissing", "DATA_LOSS/DataMissing")
	})

	t.Run("directory data unreadable", func(t *testing.T) {
		id := createVol(t, s, "dir-unreadable", 1<<20, capFor(false, ""), nil)
		wantHealth(t, s, id, "", "", "", "") // never staged: no directory yet, healthy
		deadFUSE(t, volDir(t, s, state, id)) // every access: ENOTCONN
		wantHealth(t, s, id, "", "", "INACCESSIBLE/DataUnreadable", "INACCESSIBLE/DataUnreadable")
	})

	t.Run("loop device gone", func(t *testing.T) {
		id := createVol(t, s, "blk-gone", 8<<20, capFor(true, ""), nil)
		img := filepath.Join(state, "images", id+".img")
		detachAtCleanup(t, img)
		staging, target := stagePublish(t, s, dir, id, capFor(true, ""))
		wantHealth(t, s, id, staging, target, "", "")
		dev, ok, err := block.FindLoop(ctx, img)
		if err != nil || !ok {
			t.Fatalf("no loop device for a staged block volume: %v", err)
		}
		// Taken away under the published volume, as an admin's losetup -d
		// would (block.DetachLoop refuses a device bound onto a target).
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Fatalf("losetup -d %s: %v: %s", dev, err, out)
		}
		wantHealth(t, s, id, staging, target, "INACCESSIBLE/DeviceGone,INACCESSIBLE/LoopDeviceGone", "INACCESSIBLE/LoopDeviceGone")
	})

	t.Run("filesystem read-only after errors", func(t *testing.T) {
		csitest.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
		id := createVol(t, s, "fs-ro", 16<<20, capFor(false, "ext4"), nil)
		detachAtCleanup(t, filepath.Join(state, "images", id+".img"))
		staging, target := stagePublish(t, s, dir, id, capFor(false, "ext4"))
		wantHealth(t, s, id, staging, target, "", "")
		dev, ok, _ := block.FindLoop(ctx, filepath.Join(state, "images", id+".img"))
		if !ok {
			t.Fatal("no loop device for a staged filesystem volume")
		}
		trigger := filepath.Join("/sys/fs/ext4", filepath.Base(dev), "trigger_fs_error")
		if _, err := os.Stat(trigger); err != nil {
			csitest.Skip(t, fmt.Sprintf("needs ext4's %s to inject an error: %v", trigger, err))
		}
		if err := os.WriteFile(trigger, []byte("1"), 0o200); err != nil {
			t.Fatalf("injecting an ext4 error: %v", err)
		}
		if err := os.WriteFile(filepath.Join(target, "f"), nil, 0o600); !errors.Is(err, unix.EROFS) {
			t.Errorf("writing after the error: got %v, want EROFS (the driver stages ext4 with errors=remount-ro)", err)
		}
		wantHealth(t, s, id, staging, target, "DEGRADED/FilesystemReadOnly", "")
	})

	for _, block := range []bool{true, false} {
		t.Run(fmt.Sprintf("image truncated (block=%v)", block), func(t *testing.T) {
			fsType := "ext4"
			if block {
				fsType = ""
			} else {
				csitest.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
			}
			id := createVol(t, s, fmt.Sprintf("trunc-%v", block), 16<<20, capFor(block, fsType), nil)
			img := filepath.Join(state, "images", id+".img")
			wantHealth(t, s, id, "", "", "", "")
			if err := os.Truncate(img, 4<<20); err != nil {
				t.Fatal(err)
			}
			wantHealth(t, s, id, "", "", "DATA_LOSS/ImageTruncated", "DATA_LOSS/ImageTruncated")
			if err := os.Remove(img); err != nil {
				t.Fatal(err)
			}
			wantHealth(t, s, id, "", "", "DATA_LOSS/DataMissing", "DATA_LOSS/DataMissing")
		})
	}
}

// deadFUSE mounts a FUSE file system at dir whose server is gone (the
// /dev/fuse descriptor is closed at once, as when its daemon is killed):
// every access then fails with ENOTCONN. Unmounted at cleanup.
func deadFUSE(t *testing.T, dir string) {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		csitest.Skip(t, fmt.Sprintf("needs /dev/fuse: %v", err))
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	err = unix.Mount("csikit-test", dir, "fuse.csikit-test", unix.MS_NOSUID|unix.MS_NODEV, opts)
	unix.Close(fd)
	if err != nil {
		t.Fatalf("mount fuse at %s: %v", dir, err)
	}
	unmountAtCleanup(t, dir)
}

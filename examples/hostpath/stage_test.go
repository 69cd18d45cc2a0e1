//go:build linux

package main_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/internal/testenv"
)

// detachAtCleanup detaches whatever loop device is left on img when the
// test ends, so a failing test leaks nothing.
func detachAtCleanup(t *testing.T, img string) {
	t.Cleanup(func() {
		if dev, ok, _ := block.FindLoop(context.Background(), img); ok {
			block.DetachLoop(context.Background(), dev)
		}
	})
}

// unmountAtCleanup lazily unmounts paths at the end of the test.
func unmountAtCleanup(t *testing.T, paths ...string) {
	t.Cleanup(func() {
		for _, p := range paths {
			for unix.Unmount(p, unix.MNT_DETACH) == nil {
			}
		}
	})
}

// TestFailedStageLeavesNothing: a NodeStageVolume that fails after the
// loop device is attached (here the mount, on a flag the filesystem
// refuses) leaves no loop device, no staged marker and no mount behind: the
// CO need not call NodeUnstageVolume after a failed stage, so DeleteVolume
// must work at once, and a later correct stage must work.
func TestFailedStageLeavesNothing(t *testing.T) {
	needRoot(t)
	testenv.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
	dir := shortDir(t, "hpst")
	state := filepath.Join(dir, "state")
	s := serve(t, dir, driver.Options{StateDir: state})
	ctx := context.Background()
	for _, fsType := range []string{"ext4", "xfs"} {
		t.Run(fsType, func(t *testing.T) {
			testenv.RequireCommand(t, "mkfs."+fsType, map[string]string{"ext4": "e2fsprogs", "xfs": "xfsprogs"}[fsType])
			id := createVol(t, s, "fs-"+fsType, 300<<20, capFor(false, fsType), nil)
			img := filepath.Join(state, "images", id+".img")
			marker := filepath.Join(state, "images", id+".staged")
			staging := filepath.Join(dir, "staging-"+fsType)
			detachAtCleanup(t, img)
			unmountAtCleanup(t, staging)
			checkClean := func(when string) {
				t.Helper()
				if dev, ok, err := block.FindLoop(ctx, img); err != nil || ok {
					t.Errorf("%s: loop device %s still attached to the image (%v)", when, dev, err)
				}
				if _, err := os.Stat(marker); !os.IsNotExist(err) {
					t.Errorf("%s: staged marker left behind (%v)", when, err)
				}
				if mounted(t, staging) {
					t.Errorf("%s: %s is still mounted", when, staging)
				}
			}

			bad := &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging,
				VolumeCapability: capFor(false, fsType, "no_such_mount_option_csikit")}
			_, err := s.node.NodeStageVolume(ctx, bad)
			if err == nil {
				t.Fatal("stage with a mount flag the filesystem refuses succeeded")
			}
			if msg := err.Error(); strings.Contains(msg, ": :") || strings.HasSuffix(msg, ": ") {
				t.Errorf("error message has an empty fragment: %q", msg)
			}
			checkClean("after a failed stage")

			good := &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: capFor(false, fsType)}
			if _, err := s.node.NodeStageVolume(ctx, good); err != nil {
				t.Fatalf("a correct stage after a failed one: %v", err)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Errorf("a staged volume has no marker: %v", err)
			}
			// A failing stage of a volume staged already must not tear
			// down what the first stage set up.
			other := filepath.Join(dir, "other-"+fsType)
			unmountAtCleanup(t, other)
			if _, err := s.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: other,
				VolumeCapability: bad.VolumeCapability}); err == nil {
				t.Error("a second stage with a refused mount flag succeeded")
			}
			if !mounted(t, staging) {
				t.Error("a failed second stage unmounted the staged volume")
			}
			if _, ok, _ := block.FindLoop(ctx, img); !ok {
				t.Error("a failed second stage detached the staged volume's loop device")
			}
			if _, err := os.Stat(marker); err != nil {
				t.Errorf("a failed second stage removed the staged marker: %v", err)
			}
			if err := os.WriteFile(filepath.Join(staging, "still-works"), []byte("x"), 0o600); err != nil {
				t.Errorf("writing to the staged volume after a failed second stage: %v", err)
			}
			if _, err := s.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
				t.Fatal(err)
			}
			checkClean("after unstage")

			if _, err := s.node.NodeStageVolume(ctx, bad); err == nil {
				t.Fatal("stage with a bad flag succeeded")
			}
			if _, err := s.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
				t.Errorf("DeleteVolume after a failed stage (no unstage): %v", err)
			}
			if _, err := os.Stat(img); !os.IsNotExist(err) {
				t.Errorf("image left after delete: %v", err)
			}
		})
	}
}

// mounted reports whether path is a mount point (by mountinfo).
func mounted(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

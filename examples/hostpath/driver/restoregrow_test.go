//go:build linux

package driver_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/hostpath/driver"
)

// TestRestoreAndCloneFillTheLargerVolume: a filesystem volume restored
// from a snapshot, or cloned, into a larger capacity than its source's
// stages with a filesystem as large as the new volume, and the source's
// file survives. Kubernetes' storage suite ("should provision correct
// filesystem size when restoring snapshot to larger size pvc") found the
// copy keeping the source's filesystem size: kubelet calls no
// NodeExpandVolume for a new claim, so the driver must grow it. The
// growth is offline, on the backing file before any mount, so it needs no
// CAP_SYS_RESOURCE (which growing a mounted ext4 does).
func TestRestoreAndCloneFillTheLargerVolume(t *testing.T) {
	needRoot(t)
	csitest.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
	csitest.RequireCommand(t, "resize2fs", "e2fsprogs")
	dir := shortDir(t, "hprg")
	state := filepath.Join(dir, "state")
	s := serve(t, dir, driver.Options{StateDir: state})
	ctx := context.Background()
	const small, large = 16 << 20, 64 << 20
	src := createVol(t, s, "grow-src", small, capFor(false, "ext4"), nil)
	stage := func(t *testing.T, id, name string) string {
		t.Helper()
		staging := filepath.Join(dir, name)
		detachAtCleanup(t, filepath.Join(state, "images", id+".img"))
		unmountAtCleanup(t, staging)
		if _, err := s.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging,
			VolumeCapability: capFor(false, "ext4")}); err != nil {
			t.Fatalf("stage %s: %v", id, err)
		}
		t.Cleanup(func() {
			_, _ = s.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
		})
		return staging
	}
	staging := stage(t, src, "src")
	if err := os.WriteFile(filepath.Join(staging, "kept"), []byte("from the source"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: src, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{SourceVolumeId: src, Name: "grow-snap"})
	if err != nil {
		t.Fatal(err)
	}
	for name, source := range map[string]*csi.VolumeContentSource{
		"restore": {Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshot().GetSnapshotId()}}},
		"clone":   {Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src}}},
	} {
		t.Run(name, func(t *testing.T) {
			id := createVol(t, s, "grow-"+name, large, capFor(false, "ext4"), source)
			staging := stage(t, id, name)
			var sfs unix.Statfs_t
			if err := unix.Statfs(staging, &sfs); err != nil {
				t.Fatal(err)
			}
			// ext4's own metadata takes a few percent.
			if got := int64(sfs.Blocks) * sfs.Bsize; got < large*9/10 {
				t.Errorf("the %s's filesystem is %d bytes, want about the volume's %d (the source's was %d)", name, got, large, small)
			}
			if b, err := os.ReadFile(filepath.Join(staging, "kept")); err != nil || string(b) != "from the source" {
				t.Errorf("the source's file in the %s: %q, %v", name, b, err)
			}
		})
	}
}

// TestOfflineExpansionGrowsExt4: ControllerExpandVolume of an ext4 volume
// that is not staged grows its filesystem then and there, offline, so the
// NodeExpandVolume kubelet sends after the next stage has nothing to do:
// growing a mounted ext4 needs CAP_SYS_RESOURCE, which a sandboxed node
// plugin lacks (Kubernetes' storage suite: "Verify if offline PVC
// expansion works" failed with resize2fs "Permission denied to resize
// filesystem"). A never-staged (blank) volume and its copy are left blank.
func TestOfflineExpansionGrowsExt4(t *testing.T) {
	needRoot(t)
	csitest.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
	csitest.RequireCommand(t, "resize2fs", "e2fsprogs")
	dir := shortDir(t, "hpox")
	state := filepath.Join(dir, "state")
	s := serve(t, dir, driver.Options{StateDir: state})
	ctx := context.Background()
	const small, large = 16 << 20, 64 << 20
	id := createVol(t, s, "offline", small, capFor(false, "ext4"), nil)
	staging := filepath.Join(dir, "staging")
	detachAtCleanup(t, filepath.Join(state, "images", id+".img"))
	unmountAtCleanup(t, staging)
	stage := func() {
		t.Helper()
		if _, err := s.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging,
			VolumeCapability: capFor(false, "ext4")}); err != nil {
			t.Fatal(err)
		}
	}
	unstage := func() {
		t.Helper()
		if _, err := s.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
			t.Fatal(err)
		}
	}
	stage() // formats it
	if err := os.WriteFile(filepath.Join(staging, "kept"), []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	unstage()
	resp, err := s.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id,
		CapacityRange: &csi.CapacityRange{RequiredBytes: large}, VolumeCapability: capFor(false, "ext4")})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetNodeExpansionRequired() {
		t.Error("NodeExpansionRequired false: a volume staged elsewhere still needs the node step")
	}
	stage()
	t.Cleanup(unstage)
	var sfs unix.Statfs_t
	if err := unix.Statfs(staging, &sfs); err != nil {
		t.Fatal(err)
	}
	if got := int64(sfs.Blocks) * sfs.Bsize; got < large*9/10 {
		t.Errorf("after an offline expansion to %d bytes the filesystem is %d bytes, before any NodeExpandVolume", large, got)
	}
	if b, err := os.ReadFile(filepath.Join(staging, "kept")); err != nil || string(b) != "before" {
		t.Errorf("the file written before the expansion: %q, %v", b, err)
	}
	// A blank volume (never staged) expands and restores without a
	// filesystem to grow.
	blank := createVol(t, s, "blank", small, capFor(false, "ext4"), nil)
	if _, err := s.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: blank,
		CapacityRange: &csi.CapacityRange{RequiredBytes: large}, VolumeCapability: capFor(false, "ext4")}); err != nil {
		t.Errorf("expanding a blank volume: %v", err)
	}
	createVol(t, s, "blank-clone", 2*large, capFor(false, "ext4"),
		&csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: blank}}})
}

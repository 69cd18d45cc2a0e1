//go:build linux

package driver_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

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
	// ext4's own metadata takes a few percent.
	newNodeFixture(t, "hprg", "", driver.Options{}).checkCopiesFill(t, "grow", "ext4", 16<<20, 64<<20, 90)
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
	f := newNodeFixture(t, "hpox", "", driver.Options{})
	s := f.s
	ctx := context.Background()
	const small, large = 16 << 20, 64 << 20
	v := f.vol(t, "offline", small, "ext4", nil, "staging")
	id, staging := v.id, v.staging
	stage := func() {
		t.Helper()
		if err := v.stage(ctx); err != nil {
			t.Fatal(err)
		}
	}
	unstage := func() {
		t.Helper()
		if err := v.unstage(ctx); err != nil {
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
	if got := fsSize(t, staging); got < large*9/10 {
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

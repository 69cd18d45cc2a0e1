//go:build linux

package driver_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/hostpath/driver"
)

// TestEncryptedVolumeGrowsAtStage: an encrypted filesystem volume
// expanded while unstaged, or while staged with no node step run before
// the unstage (Kubernetes' "pod is re-created on the same node after
// controller resize is finished"), stages with a filesystem as large as
// the volume — the mapping, opened afresh, covers the grown file, and the
// stage grows the ext4 on it before mounting — and keeps its data.
func TestEncryptedVolumeGrowsAtStage(t *testing.T) {
	if inCryptVM(t) {
		return
	}
	needRoot(t)
	csitest.RequireCommand(t, "cryptsetup", "cryptsetup-bin")
	csitest.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
	csitest.RequireCommand(t, "resize2fs", "e2fsprogs")
	csitest.RequireCommand(t, "mkfs.xfs", "xfsprogs")
	csitest.RequireCommand(t, "xfs_growfs", "xfsprogs")
	state := shortDir(t, "hp-encg-")
	s := serve(t, "", driver.Options{StateDir: state, EncryptionPBKDF: cheapKDF})
	for _, fsType := range []string{"ext4", "xfs"} {
		t.Run(fsType, func(t *testing.T) { testEncryptedGrowsAtStage(t, s, state, fsType) })
	}
}

func testEncryptedGrowsAtStage(t *testing.T, s *served, state, fsType string) {
	ctx := context.Background()
	base := int64(32 << 20)
	if fsType == "xfs" {
		base = 320 << 20 // mkfs.xfs's minimum is 300 MiB
	}
	secrets := map[string]string{crypt.SecretKey: passphrase}
	c := capFor(false, fsType)
	resp, err := s.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "enc-grow-" + fsType,
		Parameters:    map[string]string{driver.ParamFSType: fsType, driver.ParamEncrypted: "true"},
		CapacityRange: &csi.CapacityRange{RequiredBytes: base}, VolumeCapabilities: []*csi.VolumeCapability{c}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetVolume().GetVolumeId()
	detachAtCleanup(t, filepath.Join(state, "images", id+".img"))
	staging := filepath.Join(shortDir(t, "hp-encg-t-"), "staging")
	unmountAtCleanup(t, staging)
	stage := &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: c, Secrets: secrets}
	unstage := &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}
	expand := func(size int64) {
		t.Helper()
		if _, err := s.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id,
			CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: c, Secrets: secrets}); err != nil {
			t.Fatal(err)
		}
	}
	stageAt := func(size int64) {
		t.Helper()
		if _, err := s.node.NodeStageVolume(ctx, stage); err != nil {
			t.Fatal(err)
		}
		if got := fsSize(t, staging); got < size*75/100 || got > size {
			t.Errorf("staged: %d bytes of filesystem, want about %d", got, size)
		}
	}

	stageAt(base)
	if err := os.WriteFile(filepath.Join(staging, "kept"), []byte("before the growth"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.node.NodeUnstageVolume(ctx, unstage); err != nil {
		t.Fatal(err)
	}
	expand(base + 64<<20) // unstaged
	stageAt(base + 64<<20)
	expand(base + 128<<20) // staged, and unstaged before NodeExpandVolume
	if _, err := s.node.NodeUnstageVolume(ctx, unstage); err != nil {
		t.Fatal(err)
	}
	stageAt(base + 128<<20)
	if b, err := os.ReadFile(filepath.Join(staging, "kept")); err != nil || string(b) != "before the growth" {
		t.Errorf("the file written before: %q, %v", b, err)
	}
	// The node step kubelet sends after the stage finds nothing to do.
	if _, err := s.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: id, VolumePath: staging,
		StagingTargetPath: staging, VolumeCapability: c, Secrets: secrets,
		CapacityRange: &csi.CapacityRange{RequiredBytes: base + 128<<20}}); err != nil {
		t.Errorf("NodeExpandVolume after the stage: %v", err)
	}
	if _, err := s.node.NodeUnstageVolume(ctx, unstage); err != nil {
		t.Fatal(err)
	}
}

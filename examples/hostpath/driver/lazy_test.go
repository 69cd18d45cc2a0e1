//go:build linux

package driver_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/hostpath/driver"
)

// TestLazyDirectoryVolume: an empty directory volume's directory is made
// at its first stage, not by CreateVolume. Until then it reads as empty
// (snapshot, clone, health); its first stage makes the directory, mode
// 0777, durably (a restart finds it made); a directory that a crash left
// between the mkdir and the record is taken as it is; and once made, a
// directory that vanishes is data loss — reported, and never silently
// made again empty by the next stage.
func TestLazyDirectoryVolume(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	dir := shortDir(t, "hplazy")
	state := filepath.Join(dir, "state")
	opts := driver.Options{StateDir: state}
	s := serve(t, dir, opts)
	mnt := capFor(false, "")
	id := createVol(t, s, "lazy", 1<<20, mnt, nil)
	volPath := filepath.Join(state, "volumes", id)
	if _, err := os.Lstat(volPath); !os.IsNotExist(err) || !s.d.IsLazy(id) {
		t.Fatalf("after CreateVolume: directory %v (want none), lazy %v", err, s.d.IsLazy(id))
	}
	wantHealth(t, s, id, "", "", "", "")

	// Its snapshot and its clone are empty; the clone has no directory
	// either, a restore from the snapshot has one.
	snap, err := s.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "lazy-snap", SourceVolumeId: id})
	if err != nil {
		t.Fatal(err)
	}
	snapDir := filepath.Join(state, "snapshots", snap.GetSnapshot().GetSnapshotId())
	if es, err := os.ReadDir(snapDir); err != nil || len(es) != 0 {
		t.Errorf("snapshot of a lazy volume: %d entries, %v; want an empty directory", len(es), err)
	}
	clone := createVol(t, s, "lazy-clone", 1<<20, mnt, &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
		Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}})
	if _, err := os.Lstat(filepath.Join(state, "volumes", clone)); !os.IsNotExist(err) || !s.d.IsLazy(clone) {
		t.Errorf("clone of a lazy volume: directory %v, lazy %v; want none and lazy", err, s.d.IsLazy(clone))
	}
	restored := createVol(t, s, "lazy-restore", 1<<20, mnt, &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshot().GetSnapshotId()}}})
	if fi, err := os.Stat(filepath.Join(state, "volumes", restored)); err != nil || fi.Mode().Perm() != 0o777 || s.d.IsLazy(restored) {
		t.Errorf("restore from the empty snapshot: %v, %v, lazy %v; want a 0777 directory", fi, err, s.d.IsLazy(restored))
	}

	// A crash between the first stage's mkdir and its record: the
	// directory is there, the volume still lazy. The stage takes it.
	if err := os.Mkdir(volPath, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(volPath, "written"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	staging, target := stagePublish(t, s, dir, id, mnt)
	if b, err := os.ReadFile(filepath.Join(target, "written")); err != nil || string(b) != "kept" {
		t.Errorf("through the publish: %q, %v; want the file already in the directory", b, err)
	}
	if fi, err := os.Stat(volPath); err != nil || fi.Mode().Perm() != 0o777 || s.d.IsLazy(id) {
		t.Errorf("after the first stage: %v, %v, lazy %v; want a 0777 directory, not lazy", fi, err, s.d.IsLazy(id))
	}
	if _, err := s.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}

	// Durable: a restart finds the volume made.
	s.stop()
	s = serve(t, dir, opts)
	if s.d.IsLazy(id) {
		t.Fatal("after a restart the staged volume is lazy again")
	}

	// The made directory vanishes: data loss, reported; a stage fails
	// rather than make an empty directory in its place.
	if err := os.RemoveAll(volPath); err != nil {
		t.Fatal(err)
	}
	wantHealth(t, s, id, "", "", "DATA_LOSS/DataMissing", "DATA_LOSS/DataMissing")
	_, err = s.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mnt})
	if err == nil {
		t.Error("NodeStageVolume of a volume whose directory vanished succeeded")
	}
	if _, err := os.Lstat(volPath); !os.IsNotExist(err) {
		t.Errorf("the stage made the vanished directory again (%v): the loss would go unseen", err)
	}

	// Deleting lazy volumes removes their records and leaves nothing.
	for _, v := range []string{clone, id} {
		if _, err := s.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v}); err != nil {
			t.Errorf("DeleteVolume %s: %v", v, status.Code(err))
		}
	}
	if _, err := s.ctl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: clone}); status.Code(err) != codes.NotFound {
		t.Errorf("ControllerGetVolume of the deleted lazy clone: %v, want NotFound", err)
	}
}

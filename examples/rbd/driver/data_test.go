//go:build linux

package driver_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
)

var blockCap = &csi.VolumeCapability{
	AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
	AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
}

// blockVolume creates a 4 MiB block volume (from src, if set).
func blockVolume(t *testing.T, d *driver.Driver, c cephtest.Cluster, src *csi.VolumeContentSource) string {
	t.Helper()
	req := &csi.CreateVolumeRequest{
		Name: "data-" + journal.RandomID(""), VolumeCapabilities: []*csi.VolumeCapability{blockCap},
		Secrets: c.Secrets(), CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20}, VolumeContentSource: src,
	}
	ctx, _ := reservedVolumeID(t, d, c, req)
	resp, err := d.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetVolume().GetVolumeId()
}

func snapshot(t *testing.T, d *driver.Driver, c cephtest.Cluster, vol string) string {
	t.Helper()
	req := &csi.CreateSnapshotRequest{Name: "snap-" + journal.RandomID(""), SourceVolumeId: vol, Secrets: c.Secrets()}
	ctx := journal.ContextWithRequest(context.Background(), req)
	rec, err := d.Journal().Reserve(ctx, journal.Reservation{Kind: journal.KindSnapshot, Name: req.Name, ID: journal.RandomID("")})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := d.CreateSnapshot(journal.ContextWithReservedID(ctx, rec.ID), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetSnapshot().GetSnapshotId()
}

// publishBlock stages and publishes vol and returns the published device
// file; cleanup unpublishes and unstages it.
func publishBlock(t *testing.T, d *driver.Driver, c cephtest.Cluster, vol string) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "target")
	if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: staging, VolumeCapability: blockCap, Secrets: c.Secrets()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging}); err != nil {
			t.Errorf("unstage %s: %v", vol, err)
		}
	})
	keyNowhere(t, c.Key)
	if _, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: vol, StagingTargetPath: staging, TargetPath: target, VolumeCapability: blockCap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := d.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: target}); err != nil {
			t.Errorf("unpublish %s: %v", vol, err)
		}
	})
	return target
}

func writeAt(t *testing.T, dev string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, dev string) []byte {
	t.Helper()
	b, err := os.ReadFile(dev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDataSnapshotRestore writes through a real mapping, snapshots,
// restores into new volumes (a chain deeper than MaxCloneDepth, which
// flattens), compares bytes, deletes the source volumes while their
// snapshots and clones live, and checks that every image goes in the end.
func TestDataSnapshotRestore(t *testing.T) {
	c := cephtest.Require(t)
	cephtest.RequireRoot(t)
	if _, err := exec.LookPath("rbd-fuse"); err != nil {
		cephtest.Skipf(t, "needs rbd-fuse")
	}
	d := newDriver(t, c, driver.Options{Mapper: driver.MapperFUSE, MaxCloneDepth: 1})
	ctx := context.Background()

	a := blockVolume(t, d, c, nil)
	first := make([]byte, 1<<20)
	_, _ = rand.Read(first)
	var wantA []byte
	t.Run("write A", func(t *testing.T) {
		dev := publishBlock(t, d, c, a)
		writeAt(t, dev, first, 1<<20)
		wantA = readAll(t, dev)
	})
	s1 := snapshot(t, d, c, a)
	b := blockVolume(t, d, c, &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: s1}}})
	second := make([]byte, 1<<20)
	_, _ = rand.Read(second)
	var wantB []byte
	t.Run("restore into B, compare, write more", func(t *testing.T) {
		dev := publishBlock(t, d, c, b)
		if got := readAll(t, dev); !bytes.Equal(got, wantA) {
			t.Fatal("B (restored from A's snapshot) differs from A")
		}
		writeAt(t, dev, second, 2<<20)
		wantB = readAll(t, dev)
	})
	s2 := snapshot(t, d, c, b)
	cl := blockVolume(t, d, c, &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: s2}}})
	vc := blockVolume(t, d, c, &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: b}}})

	// Sources go first: their images hide until nothing needs them.
	for _, v := range []string{a, b} {
		if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v, Secrets: c.Secrets()}); err != nil {
			t.Fatalf("delete source %s: %v", v, err)
		}
	}
	t.Run("restore C and clone D survive their sources", func(t *testing.T) {
		for _, v := range []string{cl, vc} {
			if got := readAll(t, publishBlock(t, d, c, v)); !bytes.Equal(got, wantB) {
				t.Fatalf("%s differs from B", v)
			}
		}
	})
	// C is two clones deep with MaxCloneDepth 1: it was flattened.
	io := adminlessIO(t, c)
	img, err := rbd.OpenImageReadOnly(io, "csi-vol-"+localOf(cl), rbd.NoSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := img.GetParent(); err == nil && p.Image.ImageName != "" {
		t.Errorf("C still has parent %s; want it flattened past depth 1", p.Image.ImageName)
	}
	_ = img.Close()

	for _, s := range []string{s1, s2} {
		if _, err := d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: s, Secrets: c.Secrets()}); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{cl, vc} {
		if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v, Secrets: c.Secrets()}); err != nil {
			t.Fatal(err)
		}
	}
	names, err := rbd.GetImageNames(io)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{a, b, cl, vc} {
		hex := v[strings.IndexByte(v, '-')+2:]
		for _, n := range names {
			if strings.HasSuffix(n, hex) {
				t.Errorf("image %s is left after every volume and snapshot was deleted", n)
			}
		}
	}
}

// TestFailedStageLeavesNothing makes the mount step of a stage fail after
// the image was mapped, and checks that the mapping (rbd-fuse mount and
// loop device) is gone again.
func TestFailedStageLeavesNothing(t *testing.T) {
	c := cephtest.Require(t)
	cephtest.RequireRoot(t)
	if _, err := exec.LookPath("rbd-fuse"); err != nil {
		cephtest.Skipf(t, "needs rbd-fuse")
	}
	state := t.TempDir()
	d := newDriver(t, c, driver.Options{Mapper: driver.MapperFUSE, StateDir: state})
	vol := blockVolume(t, d, c, nil)
	t.Cleanup(func() {
		_, _ = d.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: vol, Secrets: c.Secrets()})
	})
	badMount := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: []string{"bind"}}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	_, err := d.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
		VolumeId: vol, StagingTargetPath: filepath.Join(t.TempDir(), "staging"), VolumeCapability: badMount, Secrets: c.Secrets(),
	})
	if err == nil {
		t.Fatal("stage with a bind mount flag succeeded")
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), state) {
		t.Errorf("a mount below %s is left after the failed stage:\n%s", state, mi)
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		if b, _ := os.ReadFile(l); strings.Contains(string(b), state) {
			t.Errorf("loop device %s still backs %s", l, b)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "staged")); len(ents) > 0 {
		t.Errorf("stage record left: %v", ents)
	}
	if ents, _ := os.ReadDir(filepath.Join(state, "keys")); len(ents) > 0 {
		t.Errorf("key files left: %v", ents)
	}
}

// keyNowhere fails if the key is in any process's arguments or
// environment (rbd-fuse is running now), or in a file of the test's
// temporary directories (the key files must be gone once mapped).
func keyNowhere(t *testing.T, key string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		for _, f := range []string{"cmdline", "environ"} {
			if b, err := os.ReadFile(filepath.Join(p, f)); err == nil && bytes.Contains(b, []byte(key)) {
				cmd, _ := os.ReadFile(filepath.Join(p, "cmdline"))
				t.Errorf("the key is in %s/%s (%s)", p, f, bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
			}
		}
	}
	_ = filepath.WalkDir(os.TempDir(), func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.Contains(path, t.Name()[:strings.IndexByte(t.Name()+"/", '/')]) {
			return nil
		}
		if e.Type().IsRegular() && !strings.Contains(path, "/fuse/") {
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(key)) {
				t.Errorf("the key is in file %s", path)
			}
		}
		return nil
	})
}

// TestCloneResumedAfterCrash leaves a volume clone exactly as a replica
// killed between cloning and finishing would: the source's temporary
// snapshot made and the clone made at the source's size under the reserved
// ID, neither grown nor cleaned up. The retry must finish it — the
// requested size answered and given to the image, the temporary snapshot
// gone from the source — rather than answer the clone as it found it.
func TestCloneResumedAfterCrash(t *testing.T) {
	c := cephtest.Require(t)
	d := newDriver(t, c, driver.Options{})
	ctx := context.Background()

	srcID := blockVolume(t, d, c, nil) // 4 MiB
	req := &csi.CreateVolumeRequest{
		Name: "resume-" + journal.RandomID(""), VolumeCapabilities: []*csi.VolumeCapability{blockCap}, Secrets: c.Secrets(),
		CapacityRange:       &csi.CapacityRange{RequiredBytes: 8 << 20},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: srcID}}},
	}
	rctx, id := reservedVolumeID(t, d, c, req)
	t.Cleanup(func() {
		for _, v := range []string{id, srcID} {
			if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v, Secrets: c.Secrets()}); err != nil {
				t.Errorf("delete %s: %v", v, err)
			}
		}
		_ = d.Journal().Release(rctx, journal.KindVolume, id)
	})

	// The dead replica's half of the create.
	io := adminlessIO(t, c)
	src, err := rbd.OpenImage(io, "csi-vol-"+localOf(srcID), rbd.NoSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tmpSnap := "csi-clone-" + localOf(id)
	if _, err := src.CreateSnapshot(tmpSnap); err != nil {
		t.Fatal(err)
	}
	opts := rbd.NewRbdImageOptions()
	defer opts.Destroy()
	if err := opts.SetUint64(rbd.ImageOptionFeatures, rbd.FeatureLayering); err != nil {
		t.Fatal(err)
	}
	if err := opts.SetUint64(rbd.ImageOptionCloneFormat, 2); err != nil {
		t.Fatal(err)
	}
	if err := rbd.CloneFromImage(src, tmpSnap, io, "csi-vol-"+localOf(id), opts); err != nil {
		t.Fatal(err)
	}

	resp, err := d.CreateVolume(rctx, req)
	if err != nil {
		t.Fatalf("retry of the interrupted clone: %v", err)
	}
	if got := resp.GetVolume(); got.GetVolumeId() != id || got.GetCapacityBytes() != 8<<20 {
		t.Fatalf("retry answered %s with %d bytes; want %s with %d", got.GetVolumeId(), got.GetCapacityBytes(), id, 8<<20)
	}
	img, err := rbd.OpenImageReadOnly(io, "csi-vol-"+localOf(id), rbd.NoSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	size, err := img.GetSize()
	_ = img.Close()
	if err != nil || size != 8<<20 {
		t.Errorf("the clone's image is %d bytes (%v); the answer said %d", size, err, 8<<20)
	}
	snaps, err := src.GetSnapshotNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snaps {
		if s.Name == tmpSnap {
			t.Errorf("the source still has the clone's temporary snapshot %s: it would keep the source's image alive after its DeleteVolume", tmpSnap)
		}
	}

	// An image under the reserved name that is not (yet) attached to the
	// temporary snapshot stands for another replica's clone in progress:
	// the retry answers it but leaves the snapshot to that replica, whose
	// clone would fail without it.
	req2 := &csi.CreateVolumeRequest{
		Name: "resume-" + journal.RandomID(""), VolumeCapabilities: []*csi.VolumeCapability{blockCap}, Secrets: c.Secrets(),
		CapacityRange:       &csi.CapacityRange{RequiredBytes: 4 << 20},
		VolumeContentSource: req.VolumeContentSource,
	}
	rctx2, id2 := reservedVolumeID(t, d, c, req2)
	t.Cleanup(func() {
		if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id2, Secrets: c.Secrets()}); err != nil {
			t.Errorf("delete %s: %v", id2, err)
		}
		_ = d.Journal().Release(rctx2, journal.KindVolume, id2)
	})
	tmpSnap2 := "csi-clone-" + localOf(id2)
	if _, err := src.CreateSnapshot(tmpSnap2); err != nil {
		t.Fatal(err)
	}
	blank := rbd.NewRbdImageOptions()
	defer blank.Destroy()
	if err := rbd.CreateImage(io, "csi-vol-"+localOf(id2), 4<<20, blank); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateVolume(rctx2, req2); err != nil {
		t.Fatalf("retry over a clone in progress: %v", err)
	}
	snaps, err = src.GetSnapshotNames()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range snaps {
		found = found || s.Name == tmpSnap2
	}
	if !found {
		t.Errorf("the retry removed %s, which no clone was attached to yet", tmpSnap2)
	}
	if err := src.GetSnapshot(tmpSnap2).Remove(); err != nil {
		t.Error(err)
	}
}

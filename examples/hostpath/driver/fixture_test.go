//go:build linux

package driver_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/examples/hostpath/driver"
)

// nodeFixture is the driver served on a state directory of its own, for
// the tests that stage filesystem volumes (loop devices over the state
// directory's backing files): dir is a short temporary directory (the
// staging paths go below it), state is dir/state.
type nodeFixture struct {
	dir, state string
	s          *served
}

// newNodeFixture serves the driver with opts on dir/state below a new
// short directory named after prefix: a tmpfs of tmpfsSize when set (a
// disk that fills up), a plain directory otherwise.
func newNodeFixture(t *testing.T, prefix, tmpfsSize string, opts driver.Options) *nodeFixture {
	t.Helper()
	f := &nodeFixture{dir: shortDir(t, prefix)}
	if tmpfsSize != "" {
		f.state = tmpfsState(t, f.dir, tmpfsSize)
	} else {
		f.state = filepath.Join(f.dir, "state")
	}
	opts.StateDir = f.state
	f.s = serve(t, f.dir, opts)
	return f
}

// fsVol is a filesystem volume of a nodeFixture with what a test stages it
// with: its backing file and staged marker in the state directory, its
// staging path, and its NodeStageVolume and NodeUnstageVolume requests.
type fsVol struct {
	f                        *nodeFixture
	id, img, marker, staging string
	stageReq                 *csi.NodeStageVolumeRequest
	unstageReq               *csi.NodeUnstageVolumeRequest
}

// vol creates the volume name of size bytes for fsType (from src when
// set), to be staged at dir/staging. Its loop device is detached and its
// staging path unmounted when t ends, so a failing test leaks nothing.
func (f *nodeFixture) vol(t *testing.T, name string, size int64, fsType string, src *csi.VolumeContentSource, staging string) *fsVol {
	t.Helper()
	id := createVol(t, f.s, name, size, capFor(false, fsType), src)
	v := &fsVol{f: f, id: id, staging: filepath.Join(f.dir, staging),
		img: filepath.Join(f.state, "images", id+".img"), marker: filepath.Join(f.state, "images", id+".staged")}
	v.stageReq = &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: v.staging, VolumeCapability: capFor(false, fsType)}
	v.unstageReq = &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: v.staging}
	detachAtCleanup(t, v.img)
	unmountAtCleanup(t, v.staging)
	return v
}

// stage calls NodeStageVolume.
func (v *fsVol) stage(ctx context.Context) error {
	_, err := v.f.s.node.NodeStageVolume(ctx, v.stageReq)
	return err
}

// unstage calls NodeUnstageVolume.
func (v *fsVol) unstage(ctx context.Context) error {
	_, err := v.f.s.node.NodeUnstageVolume(ctx, v.unstageReq)
	return err
}

// stagedUntilCleanup stages the volume, failing t if it cannot, and
// unstages it when t ends.
func (v *fsVol) stagedUntilCleanup(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := v.stage(ctx); err != nil {
		t.Fatalf("stage %s: %v", v.id, err)
	}
	t.Cleanup(func() { _ = v.unstage(ctx) })
}

// checkUnstaged fails t if anything of a stage is left (after a failed
// one, which the CO does not follow with NodeUnstageVolume): a loop device
// on the backing file, the staged marker, a mount at the staging path.
func (v *fsVol) checkUnstaged(t *testing.T, ctx context.Context, when string) {
	t.Helper()
	if dev, ok, err := block.FindLoop(ctx, v.img); err != nil || ok {
		t.Errorf("%s: loop device %s still attached to the image (%v)", when, dev, err)
	}
	if _, err := os.Stat(v.marker); !os.IsNotExist(err) {
		t.Errorf("%s: staged marker left behind (%v)", when, err)
	}
	if mounted(t, v.staging) {
		t.Errorf("%s: %s is still mounted", when, v.staging)
	}
}

// checkCopiesFill checks the restore and the clone of a volume into a
// larger one: a source of small bytes formatted fsType, with a file on
// it, is snapshotted, and its restore and its clone, of large bytes
// (volumes prefix-src, prefix-restore and prefix-clone, snapshot
// prefix-snap), stage with a filesystem of at least minPercent of large
// (the filesystem's metadata, or xfs's log, is outside the count) that
// holds the file.
func (f *nodeFixture) checkCopiesFill(t *testing.T, prefix, fsType string, small, large, minPercent int64) {
	t.Helper()
	ctx := context.Background()
	sv := f.vol(t, prefix+"-src", small, fsType, nil, "src")
	sv.stagedUntilCleanup(t, ctx)
	if err := os.WriteFile(filepath.Join(sv.staging, "kept"), []byte("from the source"), 0o600); err != nil {
		t.Fatal(err)
	}
	srcSize := fsSize(t, sv.staging)
	if err := sv.unstage(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := f.s.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{SourceVolumeId: sv.id, Name: prefix + "-snap"})
	if err != nil {
		t.Fatal(err)
	}
	for name, source := range map[string]*csi.VolumeContentSource{
		"restore": {Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshot().GetSnapshotId()}}},
		"clone":   {Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: sv.id}}},
	} {
		t.Run(name, func(t *testing.T) {
			v := f.vol(t, prefix+"-"+name, large, fsType, source, name)
			v.stagedUntilCleanup(t, ctx)
			if got := fsSize(t, v.staging); got < large*minPercent/100 {
				t.Errorf("the %s's filesystem is %d bytes, want about the volume's %d (the source's was %d)", name, got, large, srcSize)
			}
			if b, err := os.ReadFile(filepath.Join(v.staging, "kept")); err != nil || string(b) != "from the source" {
				t.Errorf("the source's file in the %s: %q, %v", name, b, err)
			}
		})
	}
}

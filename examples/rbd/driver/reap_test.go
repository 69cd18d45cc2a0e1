package driver_test

import (
	"context"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
)

// TestSweepReapsHiddenOrphans: a deleted volume hidden as csi-del-… for
// its snapshot is removed by the sweep once that snapshot went without
// the driver reaping it (removed behind its back, or a crash between the
// two steps of DeleteSnapshot).
func TestSweepReapsHiddenOrphans(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := cephtest.TenantPool(t, c)
	d := newDriver(t, c, driver.Options{})
	ctl := serveDriver(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vol, err := ctl.CreateVolume(ctx, tenantCreate("hidden", pool, secrets))
	if err != nil {
		t.Fatal(err)
	}
	vid := vol.GetVolume().GetVolumeId()
	snap, err := ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "hidden-snap", SourceVolumeId: vid, Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vid, Secrets: secrets}); err != nil {
		t.Fatal(err)
	}
	hidden := "csi-del-" + localOf(vid)
	if !poolHas(t, c, secrets, pool, hidden) {
		t.Fatalf("the volume with a snapshot was not hidden as %s", hidden)
	}
	// The snapshot goes behind the driver's back.
	conns := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	t.Cleanup(conns.Close)
	io, done, err := conns.IOContext(ctx, driver.Credentials{User: secrets["userID"], Key: secrets["userKey"]}, pool, "")
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	img, err := rbd.OpenImage(io, hidden, rbd.NoSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	sid := snap.GetSnapshot().GetSnapshotId()
	err = img.GetSnapshot("csi-snap-" + sid[len(sid)-32:]).Remove()
	_ = img.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.SweepAbandoned(ctx, journal.KindVolume, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if poolHas(t, c, secrets, pool, hidden) {
		t.Fatalf("the sweep left %s, which nothing needs any more", hidden)
	}
}

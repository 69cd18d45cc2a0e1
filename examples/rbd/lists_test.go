//go:build linux

package main_test

import (
	"context"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
)

// TestListsSurviveForeignPools: a tenant's CreateVolume naming a pool its
// user may not write is refused (PermissionDenied) and must not make that
// pool part of later listings, whose credentials could not list it; a pool
// deleted after it was served is skipped too. Every listing keeps
// answering, with the tenant's volumes.
func TestListsSurviveForeignPools(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := cephtest.TenantPool(t, c)
	admin := cephtest.Admin(t, c)
	foreign := cephtest.NewPool(t, admin) // the tenant has no caps on it
	adminSecrets := cephtest.AdminSecrets(t, c)
	doomed := "doomed-" + journal.RandomID("")[:8]
	if err := admin.MakePool(doomed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.DeletePool(doomed) })
	if io, err := admin.OpenIOContext(doomed); err != nil {
		t.Fatal(err)
	} else {
		err := rbd.PoolInit(io, true)
		io.Destroy()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := startDriver(t, c, pool, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mine, err := p.ctrl.CreateVolume(ctx, createReq("mine", pool, secrets))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ctrl.CreateVolume(ctx, createReq("trespass", foreign, secrets)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("CreateVolume in a pool the user may not write = %v; want PermissionDenied", err)
	}
	// A pool served, then deleted.
	if _, err := p.ctrl.CreateVolume(ctx, createReq("doomed", doomed, adminSecrets)); err != nil {
		t.Fatal(err)
	}
	if err := admin.DeletePool(doomed); err != nil {
		t.Fatal(err)
	}
	lv, err := p.ctrl.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatalf("ListVolumes after the refused create and the deleted pool: %v", err)
	}
	found := false
	for _, e := range lv.GetEntries() {
		found = found || e.GetVolume().GetVolumeId() == mine.GetVolume().GetVolumeId()
	}
	if !found {
		t.Fatalf("ListVolumes = %v; misses %s", lv, mine.GetVolume().GetVolumeId())
	}
	if _, err := p.ctrl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{Secrets: secrets}); err != nil {
		t.Fatalf("ListSnapshots after the refused create and the deleted pool: %v", err)
	}
}

// TestListSnapshotByIDAfterRestart: ListSnapshots filtered by a snapshot
// ID (or its source volume) finds the snapshot in the pool the ID names,
// also in a controller that has served nothing since it started.
func TestListSnapshotByIDAfterRestart(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := cephtest.TenantPool(t, c)
	dir := t.TempDir()
	p := startDriver(t, c, pool, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vol, err := p.ctrl.CreateVolume(ctx, createReq("listed", pool, secrets))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := p.ctrl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "listed-snap", SourceVolumeId: vol.GetVolume().GetVolumeId(), Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	sid := snap.GetSnapshot().GetSnapshotId()
	p.kill()
	p = startDriver(t, c, pool, dir)
	for _, r := range []*csi.ListSnapshotsRequest{
		{SnapshotId: sid, Secrets: secrets},
		{SourceVolumeId: vol.GetVolume().GetVolumeId(), Secrets: secrets},
	} {
		got, err := p.ctrl.ListSnapshots(ctx, r)
		if err != nil {
			t.Fatalf("ListSnapshots(%v) after a restart: %v", r, err)
		}
		if len(got.GetEntries()) != 1 || got.GetEntries()[0].GetSnapshot().GetSnapshotId() != sid {
			t.Fatalf("ListSnapshots(snapshot %q, volume %q) after a restart = %v; want %s", r.GetSnapshotId(), r.GetSourceVolumeId(), got, sid)
		}
	}
}

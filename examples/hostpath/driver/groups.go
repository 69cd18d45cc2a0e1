//go:build linux

package driver

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/csikit/csikit/journal"

	"github.com/csikit/csikit/locks"
)

// CreateVolumeGroupSnapshot snapshots every source volume under the
// journal's reserved group ID; member snapshot IDs derive from it, so a
// retry after a crash finds the members it already made.
func (d *Driver) CreateVolumeGroupSnapshot(ctx context.Context, r *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	id, ok := journal.ReservedID(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no reserved group snapshot ID: the server was built without the driver's journal")
	}
	if g, ok := d.store.group(id); ok {
		return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: d.csiGroup(ctx, &g)}, nil
	}
	for _, src := range r.GetSourceVolumeIds() {
		if _, err := d.lookup(src); err != nil {
			return nil, err
		}
	}
	g := &group{ID: id, Name: r.GetName(), Created: time.Now().UTC()}
	for i, src := range r.GetSourceVolumeIds() {
		sid := fmt.Sprintf("%s-%d", id, i)
		if len(sid) > 128 {
			return nil, status.Errorf(codes.InvalidArgument, "too many source volumes for group snapshot IDs of %d bytes", len(id))
		}
		if _, ok := d.store.snapshot(sid); !ok {
			if _, err := d.snapshotVolume(ctx, sid, r.GetName()+"-"+src, src, id); err != nil {
				return nil, err
			}
		}
		g.SnapshotIDs = append(g.SnapshotIDs, sid)
	}
	if err := d.store.putGroup(ctx, g); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.step("group:recorded")
	return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: d.csiGroup(ctx, g)}, nil
}

// csiGroup is the CSI view of g, its members as the call of ctx sees them
// (a create sees the members it has just written).
func (d *Driver) csiGroup(ctx context.Context, g *group) *csi.VolumeGroupSnapshot {
	out := &csi.VolumeGroupSnapshot{GroupSnapshotId: g.ID, CreationTime: timestamppb.New(g.Created), ReadyToUse: true}
	for _, sid := range g.SnapshotIDs {
		if x, ok := d.store.snapshotIn(ctx, sid); ok {
			out.Snapshots = append(out.Snapshots, csiSnapshot(&x))
		}
	}
	return out
}

// DeleteVolumeGroupSnapshot deletes the group and its member snapshots; an
// unknown group succeeds.
func (d *Driver) DeleteVolumeGroupSnapshot(ctx context.Context, r *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	id := r.GetGroupSnapshotId()
	g, ok := d.store.group(id)
	if !validID(id) || !ok {
		return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
	}
	if err := d.checkMembers(&g, r.GetSnapshotIds()); err != nil {
		return nil, err
	}
	for _, sid := range g.SnapshotIDs {
		x, ok := d.store.snapshot(sid)
		if !ok {
			continue
		}
		if err := d.removeSnapshotData(ctx, &x); err != nil {
			return nil, err
		}
		if err := d.store.delSnapshot(ctx, sid); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		d.ledger.release(snapshotKey(sid))
	}
	d.step("group:data-removed")
	if err := d.store.delGroup(ctx, id); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
}

// GetVolumeGroupSnapshot returns one group snapshot.
func (d *Driver) GetVolumeGroupSnapshot(ctx context.Context, r *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	id := r.GetGroupSnapshotId()
	g, ok := d.store.group(id)
	if !validID(id) || !ok {
		return nil, status.Errorf(codes.NotFound, "group snapshot %q does not exist", id)
	}
	if err := d.checkMembers(&g, r.GetSnapshotIds()); err != nil {
		return nil, err
	}
	return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: d.csiGroup(ctx, &g)}, nil
}

// checkMembers refuses a snapshot_ids list that is not the group's: the
// same set, each ID once. An empty list means the group's own.
func (d *Driver) checkMembers(g *group, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	want := make(map[string]bool, len(g.SnapshotIDs))
	for _, s := range g.SnapshotIDs {
		want[s] = true
	}
	seen := make(map[string]bool, len(ids))
	for _, s := range ids {
		if !want[s] {
			return status.Errorf(codes.InvalidArgument, "snapshot %q is not a member of group snapshot %s", s, g.ID)
		}
		if seen[s] {
			return status.Errorf(codes.InvalidArgument, "snapshot_ids lists snapshot %q more than once: list each of group snapshot %s's %d members once, or none", s, g.ID, len(g.SnapshotIDs))
		}
		seen[s] = true
	}
	if len(seen) != len(want) {
		var missing []string
		for _, s := range g.SnapshotIDs {
			if !seen[s] {
				missing = append(missing, s)
			}
		}
		return status.Errorf(codes.InvalidArgument, "snapshot_ids leaves out members %v of group snapshot %s: list all of its members, or none", missing, g.ID)
	}
	return nil
}

// LockKeys are lock keys the driver adds to csikit's, for
// csikit.Options.LockKeys: DeleteVolumeGroupSnapshot locks every member
// snapshot the driver's own record of the group names — as snapshot and as
// restore source — not only the IDs the request lists (csi-sanity and
// others send none, a request may repeat one), so a group delete fails
// with Aborted while a volume is restored from a member, instead of
// deleting the member under the copy. A group's members never change, so
// reading the record before the locks are held is safe.
func (d *Driver) LockKeys() map[string]locks.KeyFunc {
	return map[string]locks.KeyFunc{
		csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName: d.deleteGroupKeys,
	}
}

func (d *Driver) deleteGroupKeys(ctx context.Context, req any) []locks.Lock {
	held := locks.DeleteGroupSnapshotKeys(ctx, req)
	r, ok := req.(*csi.DeleteVolumeGroupSnapshotRequest)
	if !ok || !validID(r.GetGroupSnapshotId()) {
		return held
	}
	g, ok := d.store.group(r.GetGroupSnapshotId())
	if !ok {
		return held
	}
	have := make(map[locks.Key]bool, len(held))
	for _, l := range held {
		have[l.Key] = true
	}
	for _, sid := range g.SnapshotIDs {
		for _, k := range []locks.Key{{Space: locks.SpaceSnapshot, ID: sid}, {Space: locks.SpaceSourceSnapshot, ID: sid}} {
			if !have[k] {
				have[k] = true
				held = append(held, locks.Lock{Key: k, Mode: locks.Exclusive})
			}
		}
	}
	return held
}

// NodeGetStorageHealth reports no adverse condition of the node's storage
// while the state directory is usable.
func (d *Driver) NodeGetStorageHealth(ctx context.Context, r *csi.NodeGetStorageHealthRequest) (*csi.NodeGetStorageHealthResponse, error) {
	if err := d.store.ping(); err != nil {
		return nil, status.Errorf(codes.Unavailable, "state store unusable: %v", err)
	}
	return &csi.NodeGetStorageHealthResponse{}, nil
}

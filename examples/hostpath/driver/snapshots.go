//go:build linux

package driver

import (
	"context"
	"os"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/csikit/csikit/fstree"
	"github.com/csikit/csikit/idempotency"
)

// CreateSnapshot copies the source volume's data under the reserved ID.
// The server holds the source volume shared while it runs, so the volume
// cannot be deleted or expanded meanwhile, but other volumes are not
// blocked.
func (d *Driver) CreateSnapshot(ctx context.Context, r *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	id, ok := idempotency.ReservedID(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no reserved snapshot ID: the server was built without the driver's journal")
	}
	if x, ok := d.store.snapshot(id); ok {
		return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(&x)}, nil
	}
	x, err := d.snapshotVolume(ctx, id, r.GetName(), r.GetSourceVolumeId(), "")
	if err != nil {
		return nil, err
	}
	return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(x)}, nil
}

// snapshotVolume copies one volume into snapshot id.
func (d *Driver) snapshotVolume(ctx context.Context, id, name, sourceID, groupID string) (*snapshot, error) {
	v, err := d.lookup(sourceID)
	if err != nil {
		return nil, err
	}
	x := &snapshot{ID: id, Name: name, SourceID: v.ID, Size: v.Capacity, Kind: v.Kind, FSType: v.FSType,
		GroupID: groupID, Created: time.Now().UTC()}
	dst := d.snapshotPath(id, v.Kind)
	if v.Kind == kindDir {
		// A directory volume holds no more than its capacity (its quota
		// sees to it; without quotas, the snapshot refuses a volume
		// filled beyond it).
		err = copyDir(ctx, d.volumeDir(v.ID), dst, v.Capacity, true) // the volume may be in use
		if status.Code(err) == codes.OutOfRange {
			err = status.Errorf(codes.FailedPrecondition, "volume %s holds more than its capacity of %d bytes: %v", v.ID, v.Capacity, err)
		}
	} else {
		err = copyFile(ctx, d.volumeImage(v.ID), dst)
	}
	if err != nil {
		d.discardSnapshotData(x)
		return nil, err
	}
	if err := d.store.putSnapshot(ctx, x); err != nil {
		d.discardSnapshotData(x)
		return nil, status.Error(codes.Internal, err.Error())
	}
	return x, nil
}

// removeSnapshotData deletes a snapshot's data: a directory with
// fstree.Remove (no symlink followed, no mount crossed), a file with
// os.Remove. Missing data is success.
func (d *Driver) removeSnapshotData(ctx context.Context, x *snapshot) error {
	p := d.snapshotPath(x.ID, x.Kind)
	if x.Kind == kindDir {
		if err := fstree.Remove(ctx, p, fstree.RemoveOptions{}); err != nil {
			return status.Errorf(status.Code(err), "remove the data of snapshot %s: %v", x.ID, err)
		}
		return nil
	}
	if err := os.Remove(p); err != nil && !errNotExist(err) {
		return status.Errorf(codes.Internal, "remove the data of snapshot %s: %v", x.ID, err)
	}
	return nil
}

// discardSnapshotData removes the data of a snapshot that failed, logging
// what it cannot remove.
func (d *Driver) discardSnapshotData(x *snapshot) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.removeSnapshotData(ctx, x); err != nil {
		d.log.Warn("could not remove the data of a failed snapshot", "snapshot", x.ID, "error", err)
	}
}

func csiSnapshot(x *snapshot) *csi.Snapshot {
	return &csi.Snapshot{
		SnapshotId: x.ID, SourceVolumeId: x.SourceID, SizeBytes: x.Size,
		CreationTime: timestamppb.New(x.Created), ReadyToUse: true, GroupSnapshotId: x.GroupID,
	}
}

// DeleteSnapshot deletes the snapshot; an unknown one succeeds.
func (d *Driver) DeleteSnapshot(ctx context.Context, r *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	id := r.GetSnapshotId()
	if !validID(id) {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	x, ok := d.store.snapshot(id)
	if !ok {
		return &csi.DeleteSnapshotResponse{}, nil
	}
	if x.GroupID != "" {
		if _, ok := d.store.group(x.GroupID); ok {
			return nil, status.Errorf(codes.FailedPrecondition, "snapshot %s belongs to group snapshot %s: delete the group", id, x.GroupID)
		}
	}
	if err := d.removeSnapshotData(ctx, &x); err != nil {
		return nil, err
	}
	if err := d.store.delSnapshot(ctx, id); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// ListSnapshots pages through snapshots in ID order, filtered by ID or
// source volume.
func (d *Driver) ListSnapshots(ctx context.Context, r *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if id := r.GetSnapshotId(); id != "" {
		resp := &csi.ListSnapshotsResponse{}
		if x, ok := d.store.snapshot(id); ok && validID(id) && (r.GetSourceVolumeId() == "" || r.GetSourceVolumeId() == x.SourceID) {
			resp.Entries = []*csi.ListSnapshotsResponse_Entry{{Snapshot: csiSnapshot(&x)}}
		}
		return resp, nil
	}
	after, err := decodeToken(r.GetStartingToken())
	if err != nil {
		return nil, err
	}
	resp := &csi.ListSnapshotsResponse{}
	for _, x := range d.store.sortedSnapshots() {
		if after != "" && x.ID <= after {
			continue
		}
		if src := r.GetSourceVolumeId(); src != "" && x.SourceID != src {
			continue
		}
		if r.GetMaxEntries() > 0 && len(resp.Entries) == int(r.GetMaxEntries()) {
			resp.NextToken = encodeToken(resp.Entries[len(resp.Entries)-1].GetSnapshot().GetSnapshotId())
			break
		}
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: csiSnapshot(&x)})
	}
	return resp, nil
}

// GetSnapshot returns one snapshot.
func (d *Driver) GetSnapshot(ctx context.Context, r *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	id := r.GetSnapshotId()
	x, ok := d.store.snapshot(id)
	if !validID(id) || !ok {
		return nil, status.Errorf(codes.NotFound, "snapshot %q does not exist", id)
	}
	return &csi.GetSnapshotResponse{Snapshot: csiSnapshot(&x)}, nil
}

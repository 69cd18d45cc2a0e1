//go:build linux

package driver

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/csikit/csikit/fstree"
	"github.com/csikit/csikit/journal"
)

// CreateSnapshot copies the source volume's data under the reserved ID.
// The server holds the source volume shared while it runs, so the volume
// cannot be deleted or expanded meanwhile, but other volumes are not
// blocked.
func (d *Driver) CreateSnapshot(ctx context.Context, r *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	id, ok := journal.ReservedID(ctx)
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

// snapshotVolume copies one volume into snapshot id. Whatever an earlier
// attempt at this ID left (a crash after the copy was renamed into place
// but before the journal's commit made its record durable) is removed
// first: the ID is reserved to this create, so it is its own half-made
// data, and the copy is redone. The snapshot is charged the bytes its data
// takes on disk: an estimate (the source's) is reserved before copying
// (ResourceExhausted when it does not fit), the copy's measured size once
// it is made.
func (d *Driver) snapshotVolume(ctx context.Context, id, name, sourceID, groupID string) (*snapshot, error) {
	v, err := d.lookup(sourceID)
	if err != nil {
		return nil, err
	}
	x := &snapshot{ID: id, Name: name, SourceID: v.ID, Size: v.Capacity, Kind: v.Kind, FSType: v.FSType,
		GroupID: groupID, Created: time.Now().UTC()}
	if err := d.removeSnapshotLeftovers(ctx, id); err != nil {
		return nil, err
	}
	src := d.volumeImage(v.ID)
	if v.Kind == kindDir {
		src = d.dirData(&v) // "": a Lazy volume, empty
	}
	var estimate int64
	if src != "" {
		if estimate, err = diskBytes(ctx, src, v.Kind); err != nil {
			return nil, status.Errorf(status.Code(err), "measure volume %s: %v", v.ID, err)
		}
	}
	key := snapshotKey(id)
	if err := d.reserveCapacity(key, estimate); err != nil {
		return nil, status.Errorf(codes.ResourceExhausted, "snapshot of volume %s: its %d bytes on disk do not fit: %v", v.ID, estimate, status.Convert(err).Message())
	}
	d.step("snapshot:reserved")
	dst := d.snapshotPath(id, v.Kind)
	switch {
	case src == "":
		// A volume never staged holds nothing: its snapshot is an empty
		// directory, with the mode of the volume's directory-to-be.
		if err = os.Mkdir(dst, 0o777); err == nil {
			err = os.Chmod(dst, 0o777)
		}
		if err != nil {
			err = status.Errorf(codes.Internal, "snapshot of volume %s: %v", v.ID, err)
		}
	case v.Kind == kindDir:
		// A directory volume holds no more than its capacity (its quota
		// sees to it; without quotas, the snapshot refuses a volume
		// filled beyond it).
		err = copyDir(ctx, d.volumeDir(v.ID), dst, v.Capacity, true) // the volume may be in use
		if status.Code(err) == codes.OutOfRange {
			err = status.Errorf(codes.FailedPrecondition, "volume %s holds more than its capacity of %d bytes: %v", v.ID, v.Capacity, err)
		}
	default:
		err = copyFile(ctx, d.volumeImage(v.ID), dst)
	}
	if err == nil {
		d.step("snapshot:copied")
		x.DiskBytes, err = diskBytes(ctx, dst, v.Kind)
	}
	if err != nil {
		d.discardSnapshotData(x)
		d.ledger.cancel(key)
		return nil, err
	}
	d.ledger.set(key, x.DiskBytes)
	if err := d.store.putSnapshot(ctx, x); err != nil {
		d.discardSnapshotData(x)
		d.ledger.cancel(key)
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.ledger.commit(key)
	d.step("snapshot:recorded")
	return x, nil
}

// diskBytes is the space the data at p takes on disk: a directory tree's
// allocated blocks (fstree.Usage: no symlink followed, no mount crossed),
// or a file's, so holes do not count.
func diskBytes(ctx context.Context, p string, k kind) (int64, error) {
	if k == kindDir {
		u, err := fstree.Usage(ctx, p)
		return u.Bytes, err
	}
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return 0, status.Errorf(codes.Internal, "stat %s: %v", p, err)
	}
	return st.Blocks * 512, nil
}

// partialCopy is where fstree.Copy builds a copy to p before renaming it
// into place; a process killed mid-copy leaves it behind.
func partialCopy(p string) string {
	return filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".fstree-partial")
}

// removeSnapshotLeftovers removes whatever is at snapshot id's paths, of
// either kind, and a partial copy: what an earlier attempt left.
func (d *Driver) removeSnapshotLeftovers(ctx context.Context, id string) error {
	for _, k := range []kind{kindDir, kindBlock} {
		if err := d.removeSnapshotData(ctx, &snapshot{ID: id, Kind: k}); err != nil {
			return err
		}
	}
	p := partialCopy(d.snapshotPath(id, kindDir))
	if err := fstree.Remove(ctx, p, fstree.RemoveOptions{}); err != nil {
		return status.Errorf(status.Code(err), "remove a partial copy of snapshot %s: %v", id, err)
	}
	return nil
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
	d.step("snapshot:data-removed")
	if err := d.store.delSnapshot(ctx, id); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.ledger.release(snapshotKey(id))
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

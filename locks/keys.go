package locks

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// Lock is one key an RPC must hold, and how.
type Lock struct {
	// Key is the thing locked.
	Key Key
	// Mode says whether the lock is shared or exclusive.
	Mode Mode
}

// KeyFunc returns the locks a request must hold while its RPC runs. It must
// not panic on odd input: a request of an unexpected type or with empty
// fields yields no lock for those fields. Locks with an empty Key.ID are
// skipped.
type KeyFunc func(ctx context.Context, req any) []Lock

func excl(space, id string) Lock { return Lock{Key: Key{Space: space, ID: id}, Mode: Exclusive} }
func shared(space, id string) Lock {
	return Lock{Key: Key{Space: space, ID: id}, Mode: Shared}
}

// volumeIDer is satisfied by every request that carries a volume ID.
type volumeIDer interface{ GetVolumeId() string }

// VolumeIDKeys locks the request's volume ID exclusively (publish,
// unpublish, modify, stage, unstage, node expansion).
func VolumeIDKeys(_ context.Context, req any) []Lock {
	r, ok := req.(volumeIDer)
	if !ok {
		return nil
	}
	return []Lock{excl(SpaceVolume, r.GetVolumeId())}
}

// NodePublishKeys locks the volume ID and the target path exclusively.
func NodePublishKeys(_ context.Context, req any) []Lock {
	switch r := req.(type) {
	case *csi.NodePublishVolumeRequest:
		return []Lock{excl(SpaceVolume, r.GetVolumeId()), excl(SpacePath, r.GetTargetPath())}
	case *csi.NodeUnpublishVolumeRequest:
		return []Lock{excl(SpaceVolume, r.GetVolumeId()), excl(SpacePath, r.GetTargetPath())}
	}
	return nil
}

// CreateVolumeKeys locks the volume name exclusively and the source
// volume or snapshot shared when cloning or restoring.
func CreateVolumeKeys(_ context.Context, req any) []Lock {
	r, ok := req.(*csi.CreateVolumeRequest)
	if !ok {
		return nil
	}
	locks := []Lock{excl(SpaceVolumeName, r.GetName())}
	src := r.GetVolumeContentSource()
	if v := src.GetVolume(); v != nil {
		locks = append(locks, shared(SpaceSourceVolume, v.GetVolumeId()))
	}
	if s := src.GetSnapshot(); s != nil {
		locks = append(locks, shared(SpaceSourceSnapshot, s.GetSnapshotId()))
	}
	return locks
}

// DeleteVolumeKeys locks the volume ID and its source-volume operation
// lock exclusively, so it fails while a snapshot or clone is taken from it.
func DeleteVolumeKeys(_ context.Context, req any) []Lock {
	r, ok := req.(*csi.DeleteVolumeRequest)
	if !ok {
		return nil
	}
	return []Lock{excl(SpaceVolume, r.GetVolumeId()), excl(SpaceSourceVolume, r.GetVolumeId())}
}

// ExpandVolumeKeys locks like DeleteVolumeKeys.
func ExpandVolumeKeys(_ context.Context, req any) []Lock {
	r, ok := req.(*csi.ControllerExpandVolumeRequest)
	if !ok {
		return nil
	}
	return []Lock{excl(SpaceVolume, r.GetVolumeId()), excl(SpaceSourceVolume, r.GetVolumeId())}
}

// CreateSnapshotKeys locks the snapshot name exclusively and the source
// volume shared.
func CreateSnapshotKeys(_ context.Context, req any) []Lock {
	r, ok := req.(*csi.CreateSnapshotRequest)
	if !ok {
		return nil
	}
	return []Lock{excl(SpaceSnapshotName, r.GetName()), shared(SpaceSourceVolume, r.GetSourceVolumeId())}
}

// DeleteSnapshotKeys locks the snapshot ID and its source-snapshot
// operation lock exclusively, so it fails while a volume is restored from
// it or its metadata is read.
func DeleteSnapshotKeys(_ context.Context, req any) []Lock {
	r, ok := req.(*csi.DeleteSnapshotRequest)
	if !ok {
		return nil
	}
	return []Lock{excl(SpaceSnapshot, r.GetSnapshotId()), excl(SpaceSourceSnapshot, r.GetSnapshotId())}
}

// CreateGroupSnapshotKeys locks the group name exclusively and every
// source volume shared.
func CreateGroupSnapshotKeys(_ context.Context, req any) []Lock {
	r, ok := req.(*csi.CreateVolumeGroupSnapshotRequest)
	if !ok {
		return nil
	}
	locks := []Lock{excl(SpaceGroupSnapshotName, r.GetName())}
	for _, id := range dedup(r.GetSourceVolumeIds()) {
		locks = append(locks, shared(SpaceSourceVolume, id))
	}
	return locks
}

// DeleteGroupSnapshotKeys locks the group ID and every member snapshot
// exclusively.
func DeleteGroupSnapshotKeys(_ context.Context, req any) []Lock {
	r, ok := req.(*csi.DeleteVolumeGroupSnapshotRequest)
	if !ok {
		return nil
	}
	locks := []Lock{excl(SpaceGroupSnapshot, r.GetGroupSnapshotId())}
	for _, id := range dedup(r.GetSnapshotIds()) {
		locks = append(locks, excl(SpaceSnapshot, id), excl(SpaceSourceSnapshot, id))
	}
	return locks
}

// SnapshotReadKeys holds a shared lock on the source-snapshot operation
// lock of every snapshot a SnapshotMetadata request reads (snapshot_id, or
// base_snapshot_id and target_snapshot_id), so DeleteSnapshot fails with
// Aborted while the snapshot's metadata is streamed, and concurrent reads
// do not exclude each other.
func SnapshotReadKeys(_ context.Context, req any) []Lock {
	switch r := req.(type) {
	case *csi.GetMetadataAllocatedRequest:
		return []Lock{shared(SpaceSourceSnapshot, r.GetSnapshotId())}
	case *csi.GetMetadataDeltaRequest:
		return []Lock{shared(SpaceSourceSnapshot, r.GetBaseSnapshotId()), shared(SpaceSourceSnapshot, r.GetTargetSnapshotId())}
	}
	return nil
}

// dedup drops repeated IDs so one request never conflicts with itself.
func dedup(ids []string) []string {
	out := make([]string, 0, len(ids))
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			out = append(out, id)
		}
	}
	return out
}

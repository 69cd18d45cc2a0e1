package idempotency

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// Lock is one key an RPC must hold, and how.
type Lock struct {
	Key  Key
	Mode Mode
}

// KeyFunc returns the locks a request must hold while its RPC runs. It must
// not panic on odd input: a request of an unexpected type or with empty
// fields yields no lock for those fields. Locks with an empty Key.ID are
// skipped.
type KeyFunc func(ctx context.Context, req any) []Lock

// DefaultKeys returns the key functions the Interceptor uses, by gRPC full
// method name. The map is a fresh copy: callers may change it and pass it as
// Options.Keys.
//
//   - CreateVolume: the name; Shared on the source volume or snapshot when
//     cloning or restoring.
//   - DeleteVolume: the volume ID, and Exclusive on the source-volume
//     operation lock, so it fails while a snapshot or clone is taken from it.
//   - ControllerExpandVolume: like DeleteVolume.
//   - Controller(Un)PublishVolume, ControllerModifyVolume,
//     NodeStage/Unstage/ExpandVolume: the volume ID.
//   - NodePublish/UnpublishVolume: the volume ID and the target path.
//   - CreateSnapshot: the snapshot name and Shared on the source volume.
//   - DeleteSnapshot: the snapshot ID and Exclusive on the source-snapshot
//     operation lock, so it fails while a volume is restored from it.
//   - CreateVolumeGroupSnapshot: the group name and Shared on every source.
//   - DeleteVolumeGroupSnapshot: the group ID and every member snapshot ID.
//
// Read-only RPCs (List*, Get*, Validate*, stats, health) take no lock.
func DefaultKeys() map[string]KeyFunc {
	return map[string]KeyFunc{
		csi.Controller_CreateVolume_FullMethodName:              createVolumeKeys,
		csi.Controller_DeleteVolume_FullMethodName:              deleteVolumeKeys,
		csi.Controller_ControllerExpandVolume_FullMethodName:    expandVolumeKeys,
		csi.Controller_ControllerPublishVolume_FullMethodName:   volumeIDKeys,
		csi.Controller_ControllerUnpublishVolume_FullMethodName: volumeIDKeys,
		csi.Controller_ControllerModifyVolume_FullMethodName:    volumeIDKeys,
		csi.Controller_CreateSnapshot_FullMethodName:            createSnapshotKeys,
		csi.Controller_DeleteSnapshot_FullMethodName:            deleteSnapshotKeys,
		csi.Node_NodeStageVolume_FullMethodName:                 volumeIDKeys,
		csi.Node_NodeUnstageVolume_FullMethodName:               volumeIDKeys,
		csi.Node_NodeExpandVolume_FullMethodName:                volumeIDKeys,
		csi.Node_NodePublishVolume_FullMethodName:               nodePublishKeys,
		csi.Node_NodeUnpublishVolume_FullMethodName:             nodePublishKeys,

		csi.GroupController_CreateVolumeGroupSnapshot_FullMethodName: createGroupKeys,
		csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName: deleteGroupKeys,
	}
}

func excl(space, id string) Lock { return Lock{Key: Key{Space: space, ID: id}, Mode: Exclusive} }
func shared(space, id string) Lock {
	return Lock{Key: Key{Space: space, ID: id}, Mode: Shared}
}

// volumeIDer is satisfied by every request that carries a volume ID.
type volumeIDer interface{ GetVolumeId() string }

func volumeIDKeys(_ context.Context, req any) []Lock {
	r, ok := req.(volumeIDer)
	if !ok {
		return nil
	}
	return []Lock{excl(SpaceVolume, r.GetVolumeId())}
}

func nodePublishKeys(_ context.Context, req any) []Lock {
	switch r := req.(type) {
	case *csi.NodePublishVolumeRequest:
		return []Lock{excl(SpaceVolume, r.GetVolumeId()), excl(SpacePath, r.GetTargetPath())}
	case *csi.NodeUnpublishVolumeRequest:
		return []Lock{excl(SpaceVolume, r.GetVolumeId()), excl(SpacePath, r.GetTargetPath())}
	}
	return nil
}

func createVolumeKeys(_ context.Context, req any) []Lock {
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

func deleteVolumeKeys(_ context.Context, req any) []Lock {
	r, ok := req.(*csi.DeleteVolumeRequest)
	if !ok {
		return nil
	}
	return []Lock{excl(SpaceVolume, r.GetVolumeId()), excl(SpaceSourceVolume, r.GetVolumeId())}
}

func expandVolumeKeys(_ context.Context, req any) []Lock {
	r, ok := req.(*csi.ControllerExpandVolumeRequest)
	if !ok {
		return nil
	}
	return []Lock{excl(SpaceVolume, r.GetVolumeId()), excl(SpaceSourceVolume, r.GetVolumeId())}
}

func createSnapshotKeys(_ context.Context, req any) []Lock {
	r, ok := req.(*csi.CreateSnapshotRequest)
	if !ok {
		return nil
	}
	return []Lock{excl(SpaceSnapshotName, r.GetName()), shared(SpaceSourceVolume, r.GetSourceVolumeId())}
}

func deleteSnapshotKeys(_ context.Context, req any) []Lock {
	r, ok := req.(*csi.DeleteSnapshotRequest)
	if !ok {
		return nil
	}
	return []Lock{excl(SpaceSnapshot, r.GetSnapshotId()), excl(SpaceSourceSnapshot, r.GetSnapshotId())}
}

func createGroupKeys(_ context.Context, req any) []Lock {
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

func deleteGroupKeys(_ context.Context, req any) []Lock {
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

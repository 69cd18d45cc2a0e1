package idempotency

import (
	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/locks"
)

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
//   - GetMetadataAllocated, GetMetadataDelta: Shared on the source-snapshot
//     operation lock of each snapshot read (applied by the stream
//     interceptor).
//
// Read-only RPCs (List*, Get*, Validate*, stats, health) take no lock.
func DefaultKeys() map[string]locks.KeyFunc {
	return map[string]locks.KeyFunc{
		csi.Controller_CreateVolume_FullMethodName:              locks.CreateVolumeKeys,
		csi.Controller_DeleteVolume_FullMethodName:              locks.DeleteVolumeKeys,
		csi.Controller_ControllerExpandVolume_FullMethodName:    locks.ExpandVolumeKeys,
		csi.Controller_ControllerPublishVolume_FullMethodName:   locks.VolumeIDKeys,
		csi.Controller_ControllerUnpublishVolume_FullMethodName: locks.VolumeIDKeys,
		csi.Controller_ControllerModifyVolume_FullMethodName:    locks.VolumeIDKeys,
		csi.Controller_CreateSnapshot_FullMethodName:            locks.CreateSnapshotKeys,
		csi.Controller_DeleteSnapshot_FullMethodName:            locks.DeleteSnapshotKeys,
		csi.Node_NodeStageVolume_FullMethodName:                 locks.VolumeIDKeys,
		csi.Node_NodeUnstageVolume_FullMethodName:               locks.VolumeIDKeys,
		csi.Node_NodeExpandVolume_FullMethodName:                locks.VolumeIDKeys,
		csi.Node_NodePublishVolume_FullMethodName:               locks.NodePublishKeys,
		csi.Node_NodeUnpublishVolume_FullMethodName:             locks.NodePublishKeys,

		csi.GroupController_CreateVolumeGroupSnapshot_FullMethodName: locks.CreateGroupSnapshotKeys,
		csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName: locks.DeleteGroupSnapshotKeys,

		csi.SnapshotMetadata_GetMetadataAllocated_FullMethodName: locks.SnapshotReadKeys,
		csi.SnapshotMetadata_GetMetadataDelta_FullMethodName:     locks.SnapshotReadKeys,
	}
}

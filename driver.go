package csikit

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// The interfaces below are what a driver implements. Each is one capability
// group of the CSI spec and keeps the spec's own method signatures, so
// existing handlers move over unchanged. A driver value implements only the
// groups its backend supports; NewServer finds them by type assertion and
// derives every Get*Capabilities answer from what it finds (see
// Capabilities). An RPC whose interface the value lacks answers
// codes.Unimplemented.

// Prober reports readiness. Without it, Probe answers ready.
type Prober interface {
	Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error)
}

// Provisioner creates and deletes volumes (CREATE_DELETE_VOLUME).
type Provisioner interface {
	CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error)
	DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error)
}

// CapabilityValidator answers ValidateVolumeCapabilities itself. The CSI
// spec requires that RPC of every controller plugin; most drivers need not
// write it: implement VolumeLookup and csikit answers from Options. A
// controller with neither (nor the alpha VolumeGetter) is refused by
// NewServer.
type CapabilityValidator interface {
	ValidateVolumeCapabilities(context.Context, *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error)
}

// VolumeLookup tells whether a volume exists, so csikit can answer
// ValidateVolumeCapabilities (which the spec requires of every controller)
// for a driver without a CapabilityValidator: LookupVolume's error is
// returned as is (NotFound for an unknown volume, as the spec asks), and
// for a volume that exists the requested capabilities are confirmed when
// Options serves every one of them (access type, access mode, mount
// flags). It is not an RPC and is never advertised.
type VolumeLookup interface {
	LookupVolume(ctx context.Context, volumeID string) error
}

// ControllerPublisher attaches volumes to nodes (PUBLISH_UNPUBLISH_VOLUME).
type ControllerPublisher interface {
	ControllerPublishVolume(context.Context, *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error)
	ControllerUnpublishVolume(context.Context, *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error)
}

// VolumeLister lists volumes (LIST_VOLUMES; with
// Options.ListPublishedNodes also LIST_VOLUMES_PUBLISHED_NODES).
type VolumeLister interface {
	ListVolumes(context.Context, *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error)
}

// CapacityReporter reports available capacity (GET_CAPACITY).
type CapacityReporter interface {
	GetCapacity(context.Context, *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error)
}

// VolumeGetter returns one volume (GET_VOLUME, alpha in v1.14: advertised
// only with Options.Alpha).
type VolumeGetter interface {
	ControllerGetVolume(context.Context, *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error)
}

// Snapshotter creates and deletes snapshots (CREATE_DELETE_SNAPSHOT). A
// Snapshotter also accepts snapshots as CreateVolume content sources.
type Snapshotter interface {
	CreateSnapshot(context.Context, *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error)
	DeleteSnapshot(context.Context, *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error)
}

// SnapshotLister lists snapshots (LIST_SNAPSHOTS).
type SnapshotLister interface {
	ListSnapshots(context.Context, *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error)
}

// SnapshotGetter returns one snapshot (GET_SNAPSHOT, alpha).
type SnapshotGetter interface {
	GetSnapshot(context.Context, *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error)
}

// ControllerExpander expands volumes on the controller (EXPAND_VOLUME, and
// the plugin's ONLINE or OFFLINE VolumeExpansion from Options.Expansion).
type ControllerExpander interface {
	ControllerExpandVolume(context.Context, *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error)
}

// Modifier changes mutable parameters of a volume (MODIFY_VOLUME).
type Modifier interface {
	ControllerModifyVolume(context.Context, *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error)
}

// ControllerHealthReporter reports volume health from the controller
// (GET_VOLUME_HEALTH, alpha).
type ControllerHealthReporter interface {
	ControllerGetVolumeHealth(context.Context, *csi.ControllerGetVolumeHealthRequest) (*csi.ControllerGetVolumeHealthResponse, error)
}

// ControllerHealthLister lists volume health from the controller
// (LIST_VOLUME_HEALTH, alpha).
type ControllerHealthLister interface {
	ControllerListVolumeHealth(context.Context, *csi.ControllerListVolumeHealthRequest) (*csi.ControllerListVolumeHealthResponse, error)
}

// ControllerNodeInfoer answers ControllerGetNodeInfo (GET_NODE_INFO, alpha).
type ControllerNodeInfoer interface {
	ControllerGetNodeInfo(context.Context, *csi.ControllerGetNodeInfoRequest) (*csi.ControllerGetNodeInfoResponse, error)
}

// GroupSnapshotter manages volume group snapshots (the GroupController
// service, CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT).
type GroupSnapshotter interface {
	CreateVolumeGroupSnapshot(context.Context, *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error)
	DeleteVolumeGroupSnapshot(context.Context, *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error)
	GetVolumeGroupSnapshot(context.Context, *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error)
}

// NodeStager stages volumes at a node-global path (STAGE_UNSTAGE_VOLUME).
type NodeStager interface {
	NodeStageVolume(context.Context, *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error)
	NodeUnstageVolume(context.Context, *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error)
}

// NodePublisher publishes volumes into workloads. Every node plugin
// implements it; NodeGetInfo is answered by a NodeInfoer or, without one,
// from Options.NodeID, Options.MaxVolumesPerNode and Options.Topology.
type NodePublisher interface {
	NodePublishVolume(context.Context, *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error)
	NodeUnpublishVolume(context.Context, *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error)
}

// NodeInfoer answers NodeGetInfo itself, overriding the answer built from
// Options.
type NodeInfoer interface {
	NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error)
}

// NodeStatsReporter reports volume usage (GET_VOLUME_STATS). See
// stats.VolumeStats for a ready-made implementation.
type NodeStatsReporter interface {
	NodeGetVolumeStats(context.Context, *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error)
}

// NodeExpander grows the filesystem on the node (EXPAND_VOLUME).
type NodeExpander interface {
	NodeExpandVolume(context.Context, *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error)
}

// NodeHealthReporter reports volume health on the node (GET_VOLUME_HEALTH,
// alpha).
type NodeHealthReporter interface {
	NodeGetVolumeHealth(context.Context, *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error)
}

// NodeStorageHealthReporter reports the node's storage health
// (GET_STORAGE_HEALTH, alpha).
type NodeStorageHealthReporter interface {
	NodeGetStorageHealth(context.Context, *csi.NodeGetStorageHealthRequest) (*csi.NodeGetStorageHealthResponse, error)
}

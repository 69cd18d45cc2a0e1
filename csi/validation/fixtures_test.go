package validation_test

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
)

// Fixtures shared by the tests: one valid request per RPC with as many
// fields set as the spec allows, and the fields the spec makes required.

const (
	secretValue = "s3cr3t-Pa55w0rd-never-logged"
	targetPath  = "/var/lib/kubelet/pods/6f1c3c0e-4d7a-4c38-9a52-1f0f0e8b2d11/volumes/kubernetes.io~csi/pvc-4b6d8a7e-2f5c-4b71-9d8e-3c2a1b0f9e77/mount"
	stagingPath = "/var/lib/kubelet/plugins/kubernetes.io/csi/example.csikit.io/2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e/globalmount"
)

func secrets() map[string]string { return map[string]string{"password": secretValue} }

func mountCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{
			FsType: "ext4", MountFlags: []string{"noatime"},
		}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func blockCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

const snw = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER

func topo() *csi.Topology { return &csi.Topology{Segments: map[string]string{"zone": "z1"}} }

// validRequests returns a fresh valid request for every RPC of CSI v1.14,
// keyed by full method name.
func validRequests() map[string]proto.Message {
	return map[string]proto.Message{
		csi.Identity_GetPluginInfo_FullMethodName:         &csi.GetPluginInfoRequest{},
		csi.Identity_GetPluginCapabilities_FullMethodName: &csi.GetPluginCapabilitiesRequest{},
		csi.Identity_Probe_FullMethodName:                 &csi.ProbeRequest{},

		csi.Controller_CreateVolume_FullMethodName: &csi.CreateVolumeRequest{
			Name:                      "pvc-4b6d8a7e",
			CapacityRange:             &csi.CapacityRange{RequiredBytes: 1 << 30, LimitBytes: 2 << 30},
			VolumeCapabilities:        []*csi.VolumeCapability{mountCap(snw), blockCap(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY)},
			Parameters:                map[string]string{"type": "fast"},
			Secrets:                   secrets(),
			VolumeContentSource:       &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-1"}}},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo()}, Preferred: []*csi.Topology{topo()}},
			MutableParameters:         map[string]string{"iops": "100"},
		},
		csi.Controller_DeleteVolume_FullMethodName: &csi.DeleteVolumeRequest{VolumeId: "vol-1", Secrets: secrets()},
		csi.Controller_ControllerPublishVolume_FullMethodName: &csi.ControllerPublishVolumeRequest{
			VolumeId: "vol-1", NodeId: "node-1", VolumeCapability: mountCap(snw), Readonly: true,
			Secrets: secrets(), VolumeContext: map[string]string{"k": "v"},
		},
		csi.Controller_ControllerUnpublishVolume_FullMethodName: &csi.ControllerUnpublishVolumeRequest{
			VolumeId: "vol-1", NodeId: "node-1", Secrets: secrets(),
		},
		csi.Controller_ValidateVolumeCapabilities_FullMethodName: &csi.ValidateVolumeCapabilitiesRequest{
			VolumeId: "vol-1", VolumeContext: map[string]string{"k": "v"},
			VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)},
			Parameters:         map[string]string{"type": "fast"}, Secrets: secrets(),
			MutableParameters: map[string]string{"iops": "100"},
		},
		csi.Controller_ListVolumes_FullMethodName: &csi.ListVolumesRequest{MaxEntries: 10, StartingToken: "t"},
		csi.Controller_ControllerListVolumeHealth_FullMethodName: &csi.ControllerListVolumeHealthRequest{
			MaxEntries: 10, StartingToken: "t", Secrets: secrets(),
		},
		csi.Controller_ControllerGetVolumeHealth_FullMethodName: &csi.ControllerGetVolumeHealthRequest{VolumeId: "vol-1", Secrets: secrets()},
		csi.Controller_GetCapacity_FullMethodName: &csi.GetCapacityRequest{
			VolumeCapabilities: []*csi.VolumeCapability{mountCap(snw)},
			Parameters:         map[string]string{"type": "fast"}, AccessibleTopology: topo(),
		},
		csi.Controller_ControllerGetCapabilities_FullMethodName: &csi.ControllerGetCapabilitiesRequest{},
		csi.Controller_CreateSnapshot_FullMethodName: &csi.CreateSnapshotRequest{
			SourceVolumeId: "vol-1", Name: "snapshot-1", Secrets: secrets(),
			Parameters:                map[string]string{"k": "v"},
			AccessibilityRequirements: &csi.TopologyRequirement{Requisite: []*csi.Topology{topo()}},
		},
		csi.Controller_DeleteSnapshot_FullMethodName: &csi.DeleteSnapshotRequest{SnapshotId: "snap-1", Secrets: secrets()},
		csi.Controller_ListSnapshots_FullMethodName: &csi.ListSnapshotsRequest{
			MaxEntries: 5, StartingToken: "t", SourceVolumeId: "vol-1", SnapshotId: "snap-1", Secrets: secrets(),
		},
		csi.Controller_GetSnapshot_FullMethodName: &csi.GetSnapshotRequest{SnapshotId: "snap-1", Secrets: secrets()},
		csi.Controller_ControllerExpandVolume_FullMethodName: &csi.ControllerExpandVolumeRequest{
			VolumeId: "vol-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30},
			Secrets: secrets(), VolumeCapability: mountCap(snw),
		},
		csi.Controller_ControllerGetVolume_FullMethodName: &csi.ControllerGetVolumeRequest{VolumeId: "vol-1"},
		csi.Controller_ControllerModifyVolume_FullMethodName: &csi.ControllerModifyVolumeRequest{
			VolumeId: "vol-1", Secrets: secrets(), MutableParameters: map[string]string{"iops": "200"},
		},
		csi.Controller_ControllerGetNodeInfo_FullMethodName: &csi.ControllerGetNodeInfoRequest{NodeId: "node-1"},

		csi.GroupController_GroupControllerGetCapabilities_FullMethodName: &csi.GroupControllerGetCapabilitiesRequest{},
		csi.GroupController_CreateVolumeGroupSnapshot_FullMethodName: &csi.CreateVolumeGroupSnapshotRequest{
			Name: "group-1", SourceVolumeIds: []string{"vol-1", "vol-2"}, Secrets: secrets(),
			Parameters: map[string]string{"k": "v"},
		},
		csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName: &csi.DeleteVolumeGroupSnapshotRequest{
			GroupSnapshotId: "group-1", SnapshotIds: []string{"snap-1", "snap-2"}, Secrets: secrets(),
		},
		csi.GroupController_GetVolumeGroupSnapshot_FullMethodName: &csi.GetVolumeGroupSnapshotRequest{
			GroupSnapshotId: "group-1", SnapshotIds: []string{"snap-1"}, Secrets: secrets(),
		},

		csi.SnapshotMetadata_GetMetadataAllocated_FullMethodName: &csi.GetMetadataAllocatedRequest{
			SnapshotId: "snap-1", StartingOffset: 4096, MaxResults: 100, Secrets: secrets(),
		},
		csi.SnapshotMetadata_GetMetadataDelta_FullMethodName: &csi.GetMetadataDeltaRequest{
			BaseSnapshotId: "snap-1", TargetSnapshotId: "snap-2", StartingOffset: 4096, MaxResults: 100, Secrets: secrets(),
		},

		csi.Node_NodeStageVolume_FullMethodName: &csi.NodeStageVolumeRequest{
			VolumeId: "vol-1", PublishContext: map[string]string{"dev": "/dev/sdb"},
			StagingTargetPath: stagingPath, VolumeCapability: mountCap(snw),
			Secrets: secrets(), VolumeContext: map[string]string{"k": "v"},
		},
		csi.Node_NodeUnstageVolume_FullMethodName: &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: stagingPath},
		csi.Node_NodePublishVolume_FullMethodName: &csi.NodePublishVolumeRequest{
			VolumeId: "vol-1", PublishContext: map[string]string{"dev": "/dev/sdb"},
			StagingTargetPath: stagingPath, TargetPath: targetPath, VolumeCapability: mountCap(snw),
			Readonly: true, Secrets: secrets(), VolumeContext: map[string]string{"k": "v"},
		},
		csi.Node_NodeUnpublishVolume_FullMethodName: &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: targetPath},
		csi.Node_NodeGetVolumeStats_FullMethodName: &csi.NodeGetVolumeStatsRequest{
			VolumeId: "vol-1", VolumePath: targetPath, StagingTargetPath: stagingPath,
		},
		csi.Node_NodeGetVolumeHealth_FullMethodName: &csi.NodeGetVolumeHealthRequest{
			VolumeId: "vol-1", VolumePublishPath: targetPath, StagingTargetPath: stagingPath,
		},
		csi.Node_NodeGetStorageHealth_FullMethodName: &csi.NodeGetStorageHealthRequest{Secrets: secrets()},
		csi.Node_NodeExpandVolume_FullMethodName: &csi.NodeExpandVolumeRequest{
			VolumeId: "vol-1", VolumePath: targetPath, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30},
			StagingTargetPath: stagingPath, VolumeCapability: mountCap(snw), Secrets: secrets(),
		},
		csi.Node_NodeGetCapabilities_FullMethodName: &csi.NodeGetCapabilitiesRequest{},
		csi.Node_NodeGetInfo_FullMethodName:         &csi.NodeGetInfoRequest{ControllerGetNodeInfo: true},
	}
}

// required lists, per RPC, the request fields whose absence is an
// InvalidArgument "<field> is required": the spec's REQUIRED fields that a
// proto3 zero value can express as absent, minus the two csi-sanity
// exceptions documented in doc.go.
var required = map[string][]string{
	csi.Controller_CreateVolume_FullMethodName:               {"name", "volume_capabilities"},
	csi.Controller_DeleteVolume_FullMethodName:               {"volume_id"},
	csi.Controller_ControllerPublishVolume_FullMethodName:    {"volume_id", "node_id", "volume_capability"},
	csi.Controller_ControllerUnpublishVolume_FullMethodName:  {"volume_id"},
	csi.Controller_ValidateVolumeCapabilities_FullMethodName: {"volume_id", "volume_capabilities"},
	csi.Controller_ControllerGetVolumeHealth_FullMethodName:  {"volume_id"},
	csi.Controller_CreateSnapshot_FullMethodName:             {"source_volume_id", "name"},
	csi.Controller_DeleteSnapshot_FullMethodName:             {"snapshot_id"},
	csi.Controller_GetSnapshot_FullMethodName:                {"snapshot_id"},
	csi.Controller_ControllerExpandVolume_FullMethodName:     {"volume_id", "capacity_range"},
	csi.Controller_ControllerGetVolume_FullMethodName:        {"volume_id"},
	csi.Controller_ControllerModifyVolume_FullMethodName:     {"volume_id"},
	csi.Controller_ControllerGetNodeInfo_FullMethodName:      {"node_id"},

	csi.GroupController_CreateVolumeGroupSnapshot_FullMethodName: {"name", "source_volume_ids"},
	csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName: {"group_snapshot_id"},
	csi.GroupController_GetVolumeGroupSnapshot_FullMethodName:    {"group_snapshot_id"},

	csi.SnapshotMetadata_GetMetadataAllocated_FullMethodName: {"snapshot_id"},
	csi.SnapshotMetadata_GetMetadataDelta_FullMethodName:     {"base_snapshot_id", "target_snapshot_id"},

	csi.Node_NodeStageVolume_FullMethodName:     {"volume_id", "staging_target_path", "volume_capability"},
	csi.Node_NodeUnstageVolume_FullMethodName:   {"volume_id", "staging_target_path"},
	csi.Node_NodePublishVolume_FullMethodName:   {"volume_id", "target_path", "volume_capability"},
	csi.Node_NodeUnpublishVolume_FullMethodName: {"volume_id", "target_path"},
	csi.Node_NodeGetVolumeStats_FullMethodName:  {"volume_id", "volume_path"},
	csi.Node_NodeGetVolumeHealth_FullMethodName: {"volume_id"},
	csi.Node_NodeExpandVolume_FullMethodName:    {"volume_id", "volume_path"},
}

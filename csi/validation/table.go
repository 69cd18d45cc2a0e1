package validation

import "github.com/container-storage-interface/spec/lib/go/csi"

// Shorthands for the request types, to keep the table readable.
type (
	createVolume        = *csi.CreateVolumeRequest
	deleteVolume        = *csi.DeleteVolumeRequest
	controllerPublish   = *csi.ControllerPublishVolumeRequest
	controllerUnpublish = *csi.ControllerUnpublishVolumeRequest
	validateCaps        = *csi.ValidateVolumeCapabilitiesRequest
	listVolumes         = *csi.ListVolumesRequest
	listVolumeHealth    = *csi.ControllerListVolumeHealthRequest
	getVolumeHealth     = *csi.ControllerGetVolumeHealthRequest
	getCapacity         = *csi.GetCapacityRequest
	createSnapshot      = *csi.CreateSnapshotRequest
	deleteSnapshot      = *csi.DeleteSnapshotRequest
	listSnapshots       = *csi.ListSnapshotsRequest
	getSnapshot         = *csi.GetSnapshotRequest
	controllerExpand    = *csi.ControllerExpandVolumeRequest
	controllerGetVolume = *csi.ControllerGetVolumeRequest
	controllerModify    = *csi.ControllerModifyVolumeRequest
	controllerNodeInfo  = *csi.ControllerGetNodeInfoRequest
	createGroupSnapshot = *csi.CreateVolumeGroupSnapshotRequest
	deleteGroupSnapshot = *csi.DeleteVolumeGroupSnapshotRequest
	getGroupSnapshot    = *csi.GetVolumeGroupSnapshotRequest
	metadataAllocated   = *csi.GetMetadataAllocatedRequest
	metadataDelta       = *csi.GetMetadataDeltaRequest
	nodeStage           = *csi.NodeStageVolumeRequest
	nodeUnstage         = *csi.NodeUnstageVolumeRequest
	nodePublish         = *csi.NodePublishVolumeRequest
	nodeUnpublish       = *csi.NodeUnpublishVolumeRequest
	nodeStats           = *csi.NodeGetVolumeStatsRequest
	nodeVolumeHealth    = *csi.NodeGetVolumeHealthRequest
	nodeStorageHealth   = *csi.NodeGetStorageHealthRequest
	nodeExpand          = *csi.NodeExpandVolumeRequest
	nodeCapabilities    = *csi.NodeGetCapabilitiesRequest
	nodeInfo            = *csi.NodeGetInfoRequest
	pluginInfo          = *csi.GetPluginInfoRequest
	pluginCapabilities  = *csi.GetPluginCapabilitiesRequest
	probe               = *csi.ProbeRequest
	controllerCaps      = *csi.ControllerGetCapabilitiesRequest
	groupControllerCaps = *csi.GroupControllerGetCapabilitiesRequest
)

// table lists every RPC of CSI v1.14 with the rules of its request, checked
// in order; the first failing rule is reported. It is built once and only
// read afterwards.
var table = map[string]method{
	// Identity: nothing to check, listed so a wrongly typed request is caught.
	csi.Identity_GetPluginInfo_FullMethodName:         on[pluginInfo]("GetPluginInfo"),
	csi.Identity_GetPluginCapabilities_FullMethodName: on[pluginCapabilities]("GetPluginCapabilities"),
	csi.Identity_Probe_FullMethodName:                 on[probe]("Probe"),

	// Controller.
	csi.Controller_CreateVolume_FullMethodName: on[createVolume]("CreateVolume",
		requiredName("name", createVolume.GetName),
		requiredCapabilities("volume_capabilities", createVolume.GetVolumeCapabilities),
		optionalCapacity("capacity_range", createVolume.GetCapacityRange),
		contentSource("volume_content_source", createVolume.GetVolumeContentSource),
		topology("accessibility_requirements", createVolume.GetAccessibilityRequirements),
	),
	csi.Controller_DeleteVolume_FullMethodName: on[deleteVolume]("DeleteVolume",
		requiredID("volume_id", deleteVolume.GetVolumeId),
	),
	csi.Controller_ControllerPublishVolume_FullMethodName: on[controllerPublish]("ControllerPublishVolume",
		requiredID("volume_id", controllerPublish.GetVolumeId),
		requiredNodeID("node_id", controllerPublish.GetNodeId),
		requiredCapability("volume_capability", controllerPublish.GetVolumeCapability),
	),
	csi.Controller_ControllerUnpublishVolume_FullMethodName: on[controllerUnpublish]("ControllerUnpublishVolume",
		requiredID("volume_id", controllerUnpublish.GetVolumeId),
		optionalNodeID("node_id", controllerUnpublish.GetNodeId),
		when("reason", "must not be set without node_id", func(r controllerUnpublish) bool {
			return r.GetNodeId() != "" || r.GetReason() == csi.ControllerUnpublishVolumeRequest_UNKNOWN
		}),
	),
	csi.Controller_ValidateVolumeCapabilities_FullMethodName: on[validateCaps]("ValidateVolumeCapabilities",
		requiredID("volume_id", validateCaps.GetVolumeId),
		presentCapabilities("volume_capabilities", true, validateCaps.GetVolumeCapabilities),
	),
	csi.Controller_ListVolumes_FullMethodName: on[listVolumes]("ListVolumes",
		nonNegative32("max_entries", listVolumes.GetMaxEntries),
	),
	csi.Controller_ControllerListVolumeHealth_FullMethodName: on[listVolumeHealth]("ControllerListVolumeHealth",
		nonNegative32("max_entries", listVolumeHealth.GetMaxEntries),
	),
	csi.Controller_ControllerGetVolumeHealth_FullMethodName: on[getVolumeHealth]("ControllerGetVolumeHealth",
		requiredID("volume_id", getVolumeHealth.GetVolumeId),
	),
	csi.Controller_GetCapacity_FullMethodName: on[getCapacity]("GetCapacity",
		presentCapabilities("volume_capabilities", false, getCapacity.GetVolumeCapabilities),
	),
	csi.Controller_ControllerGetCapabilities_FullMethodName: on[controllerCaps]("ControllerGetCapabilities"),
	csi.Controller_CreateSnapshot_FullMethodName: on[createSnapshot]("CreateSnapshot",
		requiredID("source_volume_id", createSnapshot.GetSourceVolumeId),
		requiredName("name", createSnapshot.GetName),
		topology("accessibility_requirements", createSnapshot.GetAccessibilityRequirements),
	),
	csi.Controller_DeleteSnapshot_FullMethodName: on[deleteSnapshot]("DeleteSnapshot",
		requiredID("snapshot_id", deleteSnapshot.GetSnapshotId),
	),
	csi.Controller_ListSnapshots_FullMethodName: on[listSnapshots]("ListSnapshots",
		nonNegative32("max_entries", listSnapshots.GetMaxEntries),
		optionalID("source_volume_id", listSnapshots.GetSourceVolumeId),
		optionalID("snapshot_id", listSnapshots.GetSnapshotId),
	),
	csi.Controller_GetSnapshot_FullMethodName: on[getSnapshot]("GetSnapshot",
		requiredID("snapshot_id", getSnapshot.GetSnapshotId),
	),
	csi.Controller_ControllerExpandVolume_FullMethodName: on[controllerExpand]("ControllerExpandVolume",
		requiredID("volume_id", controllerExpand.GetVolumeId),
		requiredCapacity("capacity_range", controllerExpand.GetCapacityRange),
		optionalCapability("volume_capability", controllerExpand.GetVolumeCapability),
	),
	csi.Controller_ControllerGetVolume_FullMethodName: on[controllerGetVolume]("ControllerGetVolume",
		requiredID("volume_id", controllerGetVolume.GetVolumeId),
	),
	// mutable_parameters is REQUIRED by the spec text, but csi-sanity sends
	// an empty map unless configured otherwise; the driver judges it.
	csi.Controller_ControllerModifyVolume_FullMethodName: on[controllerModify]("ControllerModifyVolume",
		requiredID("volume_id", controllerModify.GetVolumeId),
	),
	csi.Controller_ControllerGetNodeInfo_FullMethodName: on[controllerNodeInfo]("ControllerGetNodeInfo",
		requiredNodeID("node_id", controllerNodeInfo.GetNodeId),
	),

	// GroupController. snapshot_ids of Get/Delete are REQUIRED by the spec
	// text, but csi-sanity calls both with a group snapshot ID alone and
	// expects NotFound and success; only their form is checked here.
	csi.GroupController_GroupControllerGetCapabilities_FullMethodName: on[groupControllerCaps]("GroupControllerGetCapabilities"),
	csi.GroupController_CreateVolumeGroupSnapshot_FullMethodName: on[createGroupSnapshot]("CreateVolumeGroupSnapshot",
		requiredName("name", createGroupSnapshot.GetName),
		requiredIDs("source_volume_ids", createGroupSnapshot.GetSourceVolumeIds),
	),
	csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName: on[deleteGroupSnapshot]("DeleteVolumeGroupSnapshot",
		requiredID("group_snapshot_id", deleteGroupSnapshot.GetGroupSnapshotId),
		optionalIDs("snapshot_ids", deleteGroupSnapshot.GetSnapshotIds),
	),
	csi.GroupController_GetVolumeGroupSnapshot_FullMethodName: on[getGroupSnapshot]("GetVolumeGroupSnapshot",
		requiredID("group_snapshot_id", getGroupSnapshot.GetGroupSnapshotId),
		optionalIDs("snapshot_ids", getGroupSnapshot.GetSnapshotIds),
	),

	// SnapshotMetadata (server-streaming; see StreamServerInterceptor).
	csi.SnapshotMetadata_GetMetadataAllocated_FullMethodName: on[metadataAllocated]("GetMetadataAllocated",
		requiredID("snapshot_id", metadataAllocated.GetSnapshotId),
		startingOffset("starting_offset", metadataAllocated.GetStartingOffset),
		nonNegative32("max_results", metadataAllocated.GetMaxResults),
	),
	csi.SnapshotMetadata_GetMetadataDelta_FullMethodName: on[metadataDelta]("GetMetadataDelta",
		requiredID("base_snapshot_id", metadataDelta.GetBaseSnapshotId),
		requiredID("target_snapshot_id", metadataDelta.GetTargetSnapshotId),
		startingOffset("starting_offset", metadataDelta.GetStartingOffset),
		nonNegative32("max_results", metadataDelta.GetMaxResults),
	),

	// Node.
	csi.Node_NodeStageVolume_FullMethodName: on[nodeStage]("NodeStageVolume",
		requiredID("volume_id", nodeStage.GetVolumeId),
		requiredPath("staging_target_path", nodeStage.GetStagingTargetPath),
		requiredCapability("volume_capability", nodeStage.GetVolumeCapability),
	),
	csi.Node_NodeUnstageVolume_FullMethodName: on[nodeUnstage]("NodeUnstageVolume",
		requiredID("volume_id", nodeUnstage.GetVolumeId),
		requiredPath("staging_target_path", nodeUnstage.GetStagingTargetPath),
	),
	csi.Node_NodePublishVolume_FullMethodName: on[nodePublish]("NodePublishVolume",
		requiredID("volume_id", nodePublish.GetVolumeId),
		requiredPath("target_path", nodePublish.GetTargetPath),
		requiredCapability("volume_capability", nodePublish.GetVolumeCapability),
		stagingPath("staging_target_path", nodePublish.GetStagingTargetPath),
	),
	csi.Node_NodeUnpublishVolume_FullMethodName: on[nodeUnpublish]("NodeUnpublishVolume",
		requiredID("volume_id", nodeUnpublish.GetVolumeId),
		requiredPath("target_path", nodeUnpublish.GetTargetPath),
	),
	csi.Node_NodeGetVolumeStats_FullMethodName: on[nodeStats]("NodeGetVolumeStats",
		requiredID("volume_id", nodeStats.GetVolumeId),
		lookupPath("volume_path", nodeStats.GetVolumePath),
		optionalPath("staging_target_path", nodeStats.GetStagingTargetPath),
	),
	csi.Node_NodeGetVolumeHealth_FullMethodName: on[nodeVolumeHealth]("NodeGetVolumeHealth",
		requiredID("volume_id", nodeVolumeHealth.GetVolumeId),
		optionalPath("volume_publish_path", nodeVolumeHealth.GetVolumePublishPath),
		optionalPath("staging_target_path", nodeVolumeHealth.GetStagingTargetPath),
	),
	csi.Node_NodeGetStorageHealth_FullMethodName: on[nodeStorageHealth]("NodeGetStorageHealth"),
	csi.Node_NodeExpandVolume_FullMethodName: on[nodeExpand]("NodeExpandVolume",
		requiredID("volume_id", nodeExpand.GetVolumeId),
		lookupPath("volume_path", nodeExpand.GetVolumePath),
		optionalCapacity("capacity_range", nodeExpand.GetCapacityRange),
		optionalPath("staging_target_path", nodeExpand.GetStagingTargetPath),
		optionalCapability("volume_capability", nodeExpand.GetVolumeCapability),
	),
	csi.Node_NodeGetCapabilities_FullMethodName: on[nodeCapabilities]("NodeGetCapabilities"),
	csi.Node_NodeGetInfo_FullMethodName:         on[nodeInfo]("NodeGetInfo"),
}

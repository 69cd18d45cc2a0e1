package csikit

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
)

// dispatch holds the driver's capability groups, found once by type
// assertion. A nil field is a group the driver does not implement.
type dispatch struct {
	prober       Prober
	prov         Provisioner
	validator    CapabilityValidator
	ctrlPublish  ControllerPublisher
	lister       VolumeLister
	capacity     CapacityReporter
	getter       VolumeGetter
	snap         Snapshotter
	snapList     SnapshotLister
	snapGet      SnapshotGetter
	ctrlExpand   ControllerExpander
	modifier     Modifier
	ctrlHealth   ControllerHealthReporter
	ctrlHealthLs ControllerHealthLister
	ctrlNodeInfo ControllerNodeInfoer
	group        GroupSnapshotter
	stager       NodeStager
	publisher    NodePublisher
	nodeInfo     NodeInfoer
	stats        NodeStatsReporter
	nodeExpand   NodeExpander
	nodeHealth   NodeHealthReporter
	storageHlth  NodeStorageHealthReporter
}

func newDispatch(d any) *dispatch {
	x := &dispatch{}
	x.prober, _ = d.(Prober)
	x.prov, _ = d.(Provisioner)
	x.validator, _ = d.(CapabilityValidator)
	x.ctrlPublish, _ = d.(ControllerPublisher)
	x.lister, _ = d.(VolumeLister)
	x.capacity, _ = d.(CapacityReporter)
	x.getter, _ = d.(VolumeGetter)
	x.snap, _ = d.(Snapshotter)
	x.snapList, _ = d.(SnapshotLister)
	x.snapGet, _ = d.(SnapshotGetter)
	x.ctrlExpand, _ = d.(ControllerExpander)
	x.modifier, _ = d.(Modifier)
	x.ctrlHealth, _ = d.(ControllerHealthReporter)
	x.ctrlHealthLs, _ = d.(ControllerHealthLister)
	x.ctrlNodeInfo, _ = d.(ControllerNodeInfoer)
	x.group, _ = d.(GroupSnapshotter)
	x.stager, _ = d.(NodeStager)
	x.publisher, _ = d.(NodePublisher)
	x.nodeInfo, _ = d.(NodeInfoer)
	x.stats, _ = d.(NodeStatsReporter)
	x.nodeExpand, _ = d.(NodeExpander)
	x.nodeHealth, _ = d.(NodeHealthReporter)
	x.storageHlth, _ = d.(NodeStorageHealthReporter)
	return x
}

// hasController reports whether any Controller RPC is implemented.
func (x *dispatch) hasController() bool {
	return x.prov != nil || x.ctrlPublish != nil || x.lister != nil || x.capacity != nil ||
		x.getter != nil || x.snap != nil || x.snapList != nil || x.snapGet != nil ||
		x.ctrlExpand != nil || x.modifier != nil || x.ctrlHealth != nil ||
		x.ctrlHealthLs != nil || x.ctrlNodeInfo != nil || x.validator != nil
}

// hasNode reports whether the driver is a node plugin.
func (x *dispatch) hasNode() bool {
	return x.publisher != nil
}

// served maps each full method name of the spec's Identity, Controller,
// GroupController and Node services to whether the driver implements it,
// before alpha filtering.
func (x *dispatch) served(o *Options) map[string]bool {
	ctrl, node, group := x.hasController(), x.hasNode(), x.group != nil
	return map[string]bool{
		csi.Identity_GetPluginInfo_FullMethodName:         true,
		csi.Identity_GetPluginCapabilities_FullMethodName: true,
		csi.Identity_Probe_FullMethodName:                 true,

		csi.Controller_CreateVolume_FullMethodName:               x.prov != nil,
		csi.Controller_DeleteVolume_FullMethodName:               x.prov != nil,
		csi.Controller_ControllerPublishVolume_FullMethodName:    x.ctrlPublish != nil,
		csi.Controller_ControllerUnpublishVolume_FullMethodName:  x.ctrlPublish != nil,
		csi.Controller_ValidateVolumeCapabilities_FullMethodName: x.validator != nil || x.getter != nil,
		csi.Controller_ListVolumes_FullMethodName:                x.lister != nil,
		csi.Controller_ControllerListVolumeHealth_FullMethodName: x.ctrlHealthLs != nil,
		csi.Controller_ControllerGetVolumeHealth_FullMethodName:  x.ctrlHealth != nil,
		csi.Controller_GetCapacity_FullMethodName:                x.capacity != nil,
		csi.Controller_ControllerGetCapabilities_FullMethodName:  ctrl,
		csi.Controller_CreateSnapshot_FullMethodName:             x.snap != nil,
		csi.Controller_DeleteSnapshot_FullMethodName:             x.snap != nil,
		csi.Controller_ListSnapshots_FullMethodName:              x.snapList != nil,
		csi.Controller_GetSnapshot_FullMethodName:                x.snapGet != nil,
		csi.Controller_ControllerExpandVolume_FullMethodName:     x.ctrlExpand != nil,
		csi.Controller_ControllerGetVolume_FullMethodName:        x.getter != nil,
		csi.Controller_ControllerModifyVolume_FullMethodName:     x.modifier != nil,
		csi.Controller_ControllerGetNodeInfo_FullMethodName:      x.ctrlNodeInfo != nil,

		csi.GroupController_GroupControllerGetCapabilities_FullMethodName: group,
		csi.GroupController_CreateVolumeGroupSnapshot_FullMethodName:      group,
		csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName:      group,
		csi.GroupController_GetVolumeGroupSnapshot_FullMethodName:         group,

		csi.Node_NodeStageVolume_FullMethodName:      x.stager != nil,
		csi.Node_NodeUnstageVolume_FullMethodName:    x.stager != nil,
		csi.Node_NodePublishVolume_FullMethodName:    node,
		csi.Node_NodeUnpublishVolume_FullMethodName:  node,
		csi.Node_NodeGetVolumeStats_FullMethodName:   x.stats != nil,
		csi.Node_NodeGetVolumeHealth_FullMethodName:  x.nodeHealth != nil,
		csi.Node_NodeGetStorageHealth_FullMethodName: x.storageHlth != nil,
		csi.Node_NodeExpandVolume_FullMethodName:     x.nodeExpand != nil,
		csi.Node_NodeGetCapabilities_FullMethodName:  node,
		csi.Node_NodeGetInfo_FullMethodName:          node && (x.nodeInfo != nil || o.NodeID != ""),
	}
}

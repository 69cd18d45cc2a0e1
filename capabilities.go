package csikit

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Capabilities is what a Server advertises, derived once by NewServer from
// the interfaces the driver implements and from Options. The server's
// Get*Capabilities answers are built from it and the set of RPCs it serves
// is derived from the same implementation checks, so the two never
// disagree.
type Capabilities struct {
	Plugin     []*csi.PluginCapability
	Controller []*csi.ControllerServiceCapability
	Node       []*csi.NodeServiceCapability
	Group      []*csi.GroupControllerServiceCapability
}

// HasController reports whether the capability is advertised.
func (c *Capabilities) HasController(t csi.ControllerServiceCapability_RPC_Type) bool {
	for _, x := range c.Controller {
		if x.GetRpc().GetType() == t {
			return true
		}
	}
	return false
}

// HasNode reports whether the node capability is advertised.
func (c *Capabilities) HasNode(t csi.NodeServiceCapability_RPC_Type) bool {
	for _, x := range c.Node {
		if x.GetRpc().GetType() == t {
			return true
		}
	}
	return false
}

// HasPluginService reports whether the plugin service capability is
// advertised.
func (c *Capabilities) HasPluginService(t csi.PluginCapability_Service_Type) bool {
	for _, x := range c.Plugin {
		if x.GetService().GetType() == t {
			return true
		}
	}
	return false
}

// isAlphaEnum reports whether an enum value is marked alpha in the spec.
func isAlphaEnum(v protoreflect.Enum) bool {
	d := v.Descriptor().Values().ByNumber(v.Number())
	if d == nil {
		return false
	}
	alpha, _ := proto.GetExtension(d.Options(), csi.E_AlphaEnumValue).(bool)
	return alpha
}

// alphaMethods returns the full method names the spec marks alpha.
func alphaMethods() map[string]bool {
	out := map[string]bool{}
	svcs := csi.File_csi_proto.Services()
	for i := 0; i < svcs.Len(); i++ {
		s := svcs.Get(i)
		svcAlpha, _ := proto.GetExtension(s.Options(), csi.E_AlphaService).(bool)
		for j := 0; j < s.Methods().Len(); j++ {
			m := s.Methods().Get(j)
			alpha, _ := proto.GetExtension(m.Options(), csi.E_AlphaMethod).(bool)
			if alpha || svcAlpha {
				out["/"+string(s.FullName())+"/"+string(m.Name())] = true
			}
		}
	}
	return out
}

// capSet collects capabilities, dropping alpha ones unless allowed.
type capSet struct {
	alpha bool
	caps  Capabilities
}

func (c *capSet) controller(on bool, t csi.ControllerServiceCapability_RPC_Type) {
	if !on || (!c.alpha && isAlphaEnum(t)) {
		return
	}
	c.caps.Controller = append(c.caps.Controller, &csi.ControllerServiceCapability{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}},
	})
}

func (c *capSet) node(on bool, t csi.NodeServiceCapability_RPC_Type) {
	if !on || (!c.alpha && isAlphaEnum(t)) {
		return
	}
	c.caps.Node = append(c.caps.Node, &csi.NodeServiceCapability{
		Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}},
	})
}

func (c *capSet) group(on bool, t csi.GroupControllerServiceCapability_RPC_Type) {
	if !on || (!c.alpha && isAlphaEnum(t)) {
		return
	}
	c.caps.Group = append(c.caps.Group, &csi.GroupControllerServiceCapability{
		Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{Type: t}},
	})
}

func (c *capSet) service(on bool, t csi.PluginCapability_Service_Type) {
	if !on || (!c.alpha && isAlphaEnum(t)) {
		return
	}
	c.caps.Plugin = append(c.caps.Plugin, &csi.PluginCapability{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}},
	})
}

func (c *capSet) expansion(t csi.PluginCapability_VolumeExpansion_Type) {
	c.caps.Plugin = append(c.caps.Plugin, &csi.PluginCapability{
		Type: &csi.PluginCapability_VolumeExpansion_{VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: t}},
	})
}

// deriveCapabilities computes what the server advertises for d. impl says
// which RPCs are served; capabilities are advertised only for served RPCs.
func deriveCapabilities(d *dispatch, o *Options, impl func(method string) bool) Capabilities {
	c := capSet{alpha: o.Alpha}
	c.controller(impl(csi.Controller_CreateVolume_FullMethodName), csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME)
	c.controller(impl(csi.Controller_ControllerPublishVolume_FullMethodName), csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME)
	c.controller(impl(csi.Controller_ListVolumes_FullMethodName), csi.ControllerServiceCapability_RPC_LIST_VOLUMES)
	c.controller(impl(csi.Controller_GetCapacity_FullMethodName), csi.ControllerServiceCapability_RPC_GET_CAPACITY)
	c.controller(impl(csi.Controller_CreateSnapshot_FullMethodName), csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT)
	c.controller(impl(csi.Controller_ListSnapshots_FullMethodName), csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS)
	c.controller(o.Clone && impl(csi.Controller_CreateVolume_FullMethodName), csi.ControllerServiceCapability_RPC_CLONE_VOLUME)
	c.controller(o.ReadOnlyPublish && impl(csi.Controller_ControllerPublishVolume_FullMethodName), csi.ControllerServiceCapability_RPC_PUBLISH_READONLY)
	c.controller(impl(csi.Controller_ControllerExpandVolume_FullMethodName), csi.ControllerServiceCapability_RPC_EXPAND_VOLUME)
	c.controller(o.ListPublishedNodes && impl(csi.Controller_ListVolumes_FullMethodName), csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES)
	c.controller(impl(csi.Controller_ControllerGetVolume_FullMethodName), csi.ControllerServiceCapability_RPC_GET_VOLUME)
	c.controller(o.SingleNodeMultiWriter && d.hasController(), csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)
	c.controller(impl(csi.Controller_ControllerModifyVolume_FullMethodName), csi.ControllerServiceCapability_RPC_MODIFY_VOLUME)
	c.controller(impl(csi.Controller_GetSnapshot_FullMethodName), csi.ControllerServiceCapability_RPC_GET_SNAPSHOT)
	c.controller(impl(csi.Controller_ControllerGetVolumeHealth_FullMethodName), csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH)
	c.controller(impl(csi.Controller_ControllerListVolumeHealth_FullMethodName), csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH)
	c.controller(impl(csi.Controller_ControllerGetNodeInfo_FullMethodName), csi.ControllerServiceCapability_RPC_GET_NODE_INFO)

	c.node(impl(csi.Node_NodeStageVolume_FullMethodName), csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	c.node(impl(csi.Node_NodeGetVolumeStats_FullMethodName), csi.NodeServiceCapability_RPC_GET_VOLUME_STATS)
	c.node(impl(csi.Node_NodeExpandVolume_FullMethodName), csi.NodeServiceCapability_RPC_EXPAND_VOLUME)
	c.node(o.SingleNodeMultiWriter && d.hasNode(), csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)
	c.node(o.VolumeMountGroup && d.hasNode(), csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP)
	c.node(impl(csi.Node_NodeGetVolumeHealth_FullMethodName), csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH)
	c.node(impl(csi.Node_NodeGetStorageHealth_FullMethodName), csi.NodeServiceCapability_RPC_GET_STORAGE_HEALTH)
	c.node(d.hasNode() && impl(csi.Controller_ControllerGetNodeInfo_FullMethodName), csi.NodeServiceCapability_RPC_NODE_INFO_FROM_CONTROLLER)

	c.group(impl(csi.GroupController_CreateVolumeGroupSnapshot_FullMethodName), csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)

	c.service(d.hasController(), csi.PluginCapability_Service_CONTROLLER_SERVICE)
	c.service(len(c.caps.Group) > 0, csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE)
	c.service(len(o.Topology) > 0 || o.AccessibilityConstraints, csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)
	if d.ctrlExpand != nil || d.nodeExpand != nil {
		if o.Expansion == ExpansionOffline {
			c.expansion(csi.PluginCapability_VolumeExpansion_OFFLINE)
		} else {
			c.expansion(csi.PluginCapability_VolumeExpansion_ONLINE)
		}
	}
	return c.caps
}

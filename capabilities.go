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
	// Plugin is GetPluginCapabilities' answer: the services served and
	// the volume-expansion kind.
	Plugin []*csi.PluginCapability
	// Controller is ControllerGetCapabilities' answer.
	Controller []*csi.ControllerServiceCapability
	// Node is NodeGetCapabilities' answer.
	Node []*csi.NodeServiceCapability
	// Group is GroupControllerGetCapabilities' answer.
	Group []*csi.GroupControllerServiceCapability
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

// pluginServices are the plugin service capabilities advertised for the
// spec services that have a served RPC.
var pluginServices = map[string]csi.PluginCapability_Service_Type{
	csi.Controller_ServiceDesc.ServiceName:       csi.PluginCapability_Service_CONTROLLER_SERVICE,
	csi.GroupController_ServiceDesc.ServiceName:  csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE,
	csi.SnapshotMetadata_ServiceDesc.ServiceName: csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE,
}

// deriveCapabilities computes what s advertises: the capability of every
// served table entry, then those that depend on Options as well.
func (s *Server) deriveCapabilities() Capabilities {
	o := &s.opts
	c := capSet{alpha: o.Alpha}
	seenCtrl := map[csi.ControllerServiceCapability_RPC_Type]bool{}
	seenNode := map[csi.NodeServiceCapability_RPC_Type]bool{}
	seenGroup := map[csi.GroupControllerServiceCapability_RPC_Type]bool{}
	for i := range rpcs {
		e := &rpcs[i]
		if !s.served[e.method] {
			continue
		}
		if e.ctrlCap != 0 && !seenCtrl[e.ctrlCap] {
			seenCtrl[e.ctrlCap] = true
			c.controller(true, e.ctrlCap)
		}
		if e.nodeCap != 0 && !seenNode[e.nodeCap] {
			seenNode[e.nodeCap] = true
			c.node(true, e.nodeCap)
		}
		if e.groupCap != 0 && !seenGroup[e.groupCap] {
			seenGroup[e.groupCap] = true
			c.group(true, e.groupCap)
		}
	}
	hasController := s.served[csi.Controller_ControllerGetCapabilities_FullMethodName]
	hasNode := s.served[csi.Node_NodePublishVolume_FullMethodName]
	c.controller(o.Clone && s.served[csi.Controller_CreateVolume_FullMethodName], csi.ControllerServiceCapability_RPC_CLONE_VOLUME)
	c.controller(o.ReadOnlyPublish && s.served[csi.Controller_ControllerPublishVolume_FullMethodName], csi.ControllerServiceCapability_RPC_PUBLISH_READONLY)
	c.controller(o.ListPublishedNodes && s.served[csi.Controller_ListVolumes_FullMethodName], csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES)
	c.controller(o.SingleNodeMultiWriter && hasController, csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)
	c.node(o.SingleNodeMultiWriter && hasNode, csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER)
	c.node(o.VolumeMountGroup && hasNode, csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP)
	c.node(hasNode && s.served[csi.Controller_ControllerGetNodeInfo_FullMethodName], csi.NodeServiceCapability_RPC_NODE_INFO_FROM_CONTROLLER)

	svcs := csi.File_csi_proto.Services()
	for i := 0; i < svcs.Len(); i++ {
		name := string(svcs.Get(i).FullName())
		if t, ok := pluginServices[name]; ok {
			c.service(s.servesService(name), t)
		}
	}
	c.service(len(o.Topology) > 0 || o.AccessibilityConstraints, csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)
	ctrlExpand, nodeExpand := implements[ControllerExpander](s), implements[NodeExpander](s)
	if ctrlExpand || nodeExpand {
		if o.Expansion == ExpansionOffline {
			c.expansion(csi.PluginCapability_VolumeExpansion_OFFLINE)
		} else {
			c.expansion(csi.PluginCapability_VolumeExpansion_ONLINE)
		}
	}
	return c.caps
}

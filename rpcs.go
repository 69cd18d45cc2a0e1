package csikit

import (
	"context"
	"reflect"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csikit/csikit/csi/validation"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/locks"
)

// rpcs is the one place the server learns about a CSI RPC. Everything the
// server knows about an RPC comes from its entry:
//
//   - interface detection and forwarding: unary(method, Iface.Method) (or
//     stream(...)) finds the driver's implementation by type assertion and
//     forwards to it; builtin entries answer from Options;
//   - the served set: an entry is served when its binding finds an
//     implementation (and, for alpha RPCs, with Options.Alpha);
//   - capability derivation: .ctrl/.node/.group name the capability a
//     served entry advertises; the plugin's service capabilities follow
//     from the services that have a served entry;
//   - the gRPC registration: each spec service's grpc.ServiceDesc is built
//     from its entries (serviceDescs), so no hand-written forwarders exist;
//   - validation: the rule of csi/validation's spec-checked table for the
//     method (validation.Lookup), resolved once per entry;
//   - the lock keys: .locks names the key function (package locks) whose
//     keys a call holds while it runs; LockKeys collects them, the Server
//     hands them to the idempotency interceptor, Options.LockKeys amends
//     them;
//   - the log level of a successful call: .mutating() logs at Info, the
//     rest (reads and the polling RPCs) at Debug.
//
// Adding an RPC is its driver interface (driver.go), one entry here and
// its validation rule (csi/validation/table.go); ARCHITECTURE.md says
// how. TestTableCoversSpec fails until every RPC of every spec service is
// either here or in unsupported with a reason, TestTableInterfaces until
// every interface with an RPC's method is an entry's.
var rpcs = []rpc{
	// Identity: always served, answered by csikit (Probe by the driver's
	// Prober when it has one).
	builtin(csi.Identity_GetPluginInfo_FullMethodName, func(s *Server, _ context.Context, _ *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
		return &csi.GetPluginInfoResponse{Name: s.opts.Name, VendorVersion: s.opts.Version, Manifest: s.opts.Manifest}, nil
	}),
	builtin(csi.Identity_GetPluginCapabilities_FullMethodName, func(s *Server, _ context.Context, _ *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
		return &csi.GetPluginCapabilitiesResponse{Capabilities: s.caps.Plugin}, nil
	}),
	// Probe: a journal that cannot write fails it first (journalHealthy),
	// then the driver's Prober answers, else ready.
	guarded(orElse(unary(csi.Identity_Probe_FullMethodName, Prober.Probe), always, probeReady), journalHealthy),

	// Controller.
	unary(csi.Controller_CreateVolume_FullMethodName, Provisioner.CreateVolume).
		ctrl(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME).locks(locks.CreateVolumeKeys).mutating(),
	unary(csi.Controller_DeleteVolume_FullMethodName, Provisioner.DeleteVolume).
		ctrl(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME).locks(locks.DeleteVolumeKeys).mutating(),
	// A Fencer's nodes are fenced at unpublish and refused at publish
	// until unfenced (fence.go).
	fenced(unary(csi.Controller_ControllerPublishVolume_FullMethodName, ControllerPublisher.ControllerPublishVolume), (*fencing).publish).
		ctrl(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME).locks(locks.VolumeIDKeys).mutating(),
	fenced(unary(csi.Controller_ControllerUnpublishVolume_FullMethodName, ControllerPublisher.ControllerUnpublishVolume), (*fencing).unpublish).
		ctrl(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME).locks(locks.VolumeIDKeys).mutating(),
	// Without a CapabilityValidator, csikit answers from a VolumeLookup
	// (or the alpha VolumeGetter): NotFound from the lookup, else the
	// capabilities confirmed against Options. NewServer refuses a
	// controller with none of the three: the RPC is required.
	orElse(unary(csi.Controller_ValidateVolumeCapabilities_FullMethodName, CapabilityValidator.ValidateVolumeCapabilities),
		canLookUpVolumes, confirmCapabilities),
	unary(csi.Controller_ListVolumes_FullMethodName, VolumeLister.ListVolumes).
		ctrl(csi.ControllerServiceCapability_RPC_LIST_VOLUMES),
	unary(csi.Controller_ControllerListVolumeHealth_FullMethodName, ControllerHealthLister.ControllerListVolumeHealth).
		ctrl(csi.ControllerServiceCapability_RPC_LIST_VOLUME_HEALTH),
	unary(csi.Controller_ControllerGetVolumeHealth_FullMethodName, ControllerHealthReporter.ControllerGetVolumeHealth).
		ctrl(csi.ControllerServiceCapability_RPC_GET_VOLUME_HEALTH),
	unary(csi.Controller_GetCapacity_FullMethodName, CapacityReporter.GetCapacity).
		ctrl(csi.ControllerServiceCapability_RPC_GET_CAPACITY),
	builtin(csi.Controller_ControllerGetCapabilities_FullMethodName, func(s *Server, _ context.Context, _ *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
		return &csi.ControllerGetCapabilitiesResponse{Capabilities: s.caps.Controller}, nil
	}).serviceCapabilities(),
	unary(csi.Controller_CreateSnapshot_FullMethodName, Snapshotter.CreateSnapshot).
		ctrl(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT).locks(locks.CreateSnapshotKeys).mutating(),
	unary(csi.Controller_DeleteSnapshot_FullMethodName, Snapshotter.DeleteSnapshot).
		ctrl(csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT).locks(locks.DeleteSnapshotKeys).mutating(),
	unary(csi.Controller_ListSnapshots_FullMethodName, SnapshotLister.ListSnapshots).
		ctrl(csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS),
	unary(csi.Controller_GetSnapshot_FullMethodName, SnapshotGetter.GetSnapshot).
		ctrl(csi.ControllerServiceCapability_RPC_GET_SNAPSHOT),
	unary(csi.Controller_ControllerExpandVolume_FullMethodName, ControllerExpander.ControllerExpandVolume).
		ctrl(csi.ControllerServiceCapability_RPC_EXPAND_VOLUME).locks(locks.ExpandVolumeKeys).mutating(),
	unary(csi.Controller_ControllerGetVolume_FullMethodName, VolumeGetter.ControllerGetVolume).
		ctrl(csi.ControllerServiceCapability_RPC_GET_VOLUME),
	unary(csi.Controller_ControllerModifyVolume_FullMethodName, Modifier.ControllerModifyVolume).
		ctrl(csi.ControllerServiceCapability_RPC_MODIFY_VOLUME).locks(locks.VolumeIDKeys).mutating(),
	unary(csi.Controller_ControllerGetNodeInfo_FullMethodName, ControllerNodeInfoer.ControllerGetNodeInfo).
		ctrl(csi.ControllerServiceCapability_RPC_GET_NODE_INFO),

	// GroupController.
	builtin(csi.GroupController_GroupControllerGetCapabilities_FullMethodName, func(s *Server, _ context.Context, _ *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
		return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: s.caps.Group}, nil
	}).serviceCapabilities(),
	unary(csi.GroupController_CreateVolumeGroupSnapshot_FullMethodName, GroupSnapshotter.CreateVolumeGroupSnapshot).
		group(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT).locks(locks.CreateGroupSnapshotKeys).mutating(),
	unary(csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName, GroupSnapshotter.DeleteVolumeGroupSnapshot).
		group(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT).locks(locks.DeleteGroupSnapshotKeys).mutating(),
	unary(csi.GroupController_GetVolumeGroupSnapshot_FullMethodName, GroupSnapshotter.GetVolumeGroupSnapshot).
		group(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT),

	// SnapshotMetadata (server-streaming; the service is alpha in v1.14).
	metadataStream(csi.SnapshotMetadata_GetMetadataAllocated_FullMethodName, SnapshotMetadataReader.GetMetadataAllocated,
		(*csi.GetMetadataAllocatedRequest).GetStartingOffset, (*csi.GetMetadataAllocatedRequest).GetMaxResults, allocatedResponse).
		locks(locks.SnapshotReadKeys),
	metadataStream(csi.SnapshotMetadata_GetMetadataDelta_FullMethodName, SnapshotMetadataReader.GetMetadataDelta,
		(*csi.GetMetadataDeltaRequest).GetStartingOffset, (*csi.GetMetadataDeltaRequest).GetMaxResults, deltaResponse).
		locks(locks.SnapshotReadKeys),

	// Node. NodePublisher makes a node plugin; the node's capability RPC
	// and NodeGetInfo are served for node plugins only.
	unary(csi.Node_NodeStageVolume_FullMethodName, NodeStager.NodeStageVolume).
		node(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME).locks(locks.VolumeIDKeys).mutating(),
	unary(csi.Node_NodeUnstageVolume_FullMethodName, NodeStager.NodeUnstageVolume).
		node(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME).locks(locks.VolumeIDKeys).mutating(),
	unary(csi.Node_NodePublishVolume_FullMethodName, NodePublisher.NodePublishVolume).
		locks(locks.NodePublishKeys).mutating(),
	unary(csi.Node_NodeUnpublishVolume_FullMethodName, NodePublisher.NodeUnpublishVolume).
		locks(locks.NodePublishKeys).mutating(),
	unary(csi.Node_NodeGetVolumeStats_FullMethodName, NodeStatsReporter.NodeGetVolumeStats).
		node(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS),
	unary(csi.Node_NodeExpandVolume_FullMethodName, NodeExpander.NodeExpandVolume).
		node(csi.NodeServiceCapability_RPC_EXPAND_VOLUME).locks(locks.VolumeIDKeys).mutating(),
	builtin(csi.Node_NodeGetCapabilities_FullMethodName, func(s *Server, _ context.Context, _ *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
		return &csi.NodeGetCapabilitiesResponse{Capabilities: s.caps.Node}, nil
	}).when(implements[NodePublisher]),
	// Without a NodeInfoer, a node plugin answers from Options.NodeID,
	// MaxVolumesPerNode and Topology.
	orElse(unary(csi.Node_NodeGetInfo_FullMethodName, NodeInfoer.NodeGetInfo).when(implements[NodePublisher]),
		func(s *Server) bool { return s.opts.NodeID != "" }, nodeInfoFromOptions),
	unary(csi.Node_NodeGetVolumeHealth_FullMethodName, NodeHealthReporter.NodeGetVolumeHealth).
		node(csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH),
	unary(csi.Node_NodeGetStorageHealth_FullMethodName, NodeStorageHealthReporter.NodeGetStorageHealth).
		node(csi.NodeServiceCapability_RPC_GET_STORAGE_HEALTH),
}

// unsupported lists the spec RPCs csikit deliberately does not serve, with
// the reason. It is empty in CSI v1.14; TestTableCoversSpec reads it.
var unsupported = map[string]string{}

// A unaryCall is a bound unary RPC: request in, response out.
type unaryCall func(ctx context.Context, req any) (any, error)

// A streamCall is a bound server-streaming RPC: the request was received
// (and validated) already.
type streamCall func(req any, ss grpc.ServerStream) error

// rpc is one entry of the table. Build entries with unary, builtin or
// metadataStream and the modifiers below.
type rpc struct {
	method string       // gRPC full method name
	iface  reflect.Type // the driver interface that implements it (nil for builtins)
	newReq func() any   // a new, empty request message

	// bindUnary (or bindStream, for streaming RPCs) returns the call that
	// serves the RPC for this server's driver, or nil when it is not served.
	bindUnary  func(s *Server) unaryCall
	bindStream func(s *Server) streamCall
	// onlyIf, when set, must hold for the RPC to be served at all.
	onlyIf func(s *Server) bool
	// ofService marks a Get*Capabilities RPC: served when any other RPC of
	// its service is.
	ofService bool

	ctrlCap  csi.ControllerServiceCapability_RPC_Type
	nodeCap  csi.NodeServiceCapability_RPC_Type
	groupCap csi.GroupControllerServiceCapability_RPC_Type

	keys    locks.KeyFunc // lock keys of a call; nil: none
	mutates bool          // a successful call logs at Info (else Debug)
}

// implements reports whether the server's driver implements I and
// Options.Disable does not switch it off.
func implements[I any](s *Server) bool {
	_, ok := as[I](s)
	return ok
}

// as returns the driver as I, unless it does not implement I or
// Options.Disable lists I.
func as[I any](s *Server) (I, bool) {
	d, ok := s.driver.(I)
	if ok && s.disabled[reflect.TypeFor[I]()] {
		var zero I
		return zero, false
	}
	return d, ok
}

// unary is an RPC the driver serves through interface I; call is the
// interface's method expression (Provisioner.CreateVolume).
func unary[I any, Req, Resp any](method string, call func(I, context.Context, *Req) (*Resp, error)) rpc {
	return rpc{
		method: method,
		iface:  reflect.TypeFor[I](),
		newReq: func() any { return new(Req) },
		bindUnary: func(s *Server) unaryCall {
			d, ok := as[I](s)
			if !ok {
				return nil
			}
			return func(ctx context.Context, req any) (any, error) { return call(d, ctx, req.(*Req)) }
		},
	}
}

// builtin is an RPC csikit answers itself.
func builtin[Req, Resp any](method string, call func(*Server, context.Context, *Req) (*Resp, error)) rpc {
	return rpc{
		method: method,
		newReq: func() any { return new(Req) },
		bindUnary: func(s *Server) unaryCall {
			return func(ctx context.Context, req any) (any, error) { return call(s, ctx, req.(*Req)) }
		},
	}
}

// guarded makes a unary entry answer guard's error, when it has one,
// instead of calling the driver.
func guarded(r rpc, guard func(*Server) error) rpc {
	bind := r.bindUnary
	r.bindUnary = func(s *Server) unaryCall {
		c := bind(s)
		if c == nil {
			return nil
		}
		return func(ctx context.Context, req any) (any, error) {
			if err := guard(s); err != nil {
				return nil, err
			}
			return c(ctx, req)
		}
	}
	return r
}

// journalHealthy fails while Options.Journal reports itself unable to
// write (journal.HealthReporter, a poisoned journal.File): the plugin is
// unhealthy, and the spec's answer to Probe is FAILED_PRECONDITION.
func journalHealthy(s *Server) error {
	if h, ok := s.opts.Journal.(journal.HealthReporter); ok {
		if err := h.Err(); err != nil {
			return status.Errorf(codes.FailedPrecondition, "journal: %s", status.Convert(err).Message())
		}
	}
	return nil
}

// orElse gives a unary entry a fallback for drivers that lack its
// interface: served by call when ok holds.
func orElse[Req, Resp any](r rpc, ok func(*Server) bool, call func(*Server, context.Context, *Req) (*Resp, error)) rpc {
	bind := r.bindUnary
	r.bindUnary = func(s *Server) unaryCall {
		if c := bind(s); c != nil {
			return c
		}
		if !ok(s) {
			return nil
		}
		return func(ctx context.Context, req any) (any, error) { return call(s, ctx, req.(*Req)) }
	}
	return r
}

// The modifiers below return a changed copy of the entry.

func (r rpc) ctrl(c csi.ControllerServiceCapability_RPC_Type) rpc       { r.ctrlCap = c; return r }
func (r rpc) node(c csi.NodeServiceCapability_RPC_Type) rpc             { r.nodeCap = c; return r }
func (r rpc) group(c csi.GroupControllerServiceCapability_RPC_Type) rpc { r.groupCap = c; return r }
func (r rpc) locks(k locks.KeyFunc) rpc                                 { r.keys = k; return r }
func (r rpc) mutating() rpc                                             { r.mutates = true; return r }
func (r rpc) serviceCapabilities() rpc                                  { r.ofService = true; return r }
func (r rpc) when(ok func(*Server) bool) rpc                            { r.onlyIf = ok; return r }

// service returns the spec service name of a full method name.
func service(method string) string {
	for i := 1; i < len(method); i++ {
		if method[i] == '/' {
			return method[1:i]
		}
	}
	return ""
}

// always is the condition of a fallback that always serves.
func always(*Server) bool { return true }

// probeReady is Probe for a driver without a Prober: ready.
func probeReady(*Server, context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

// canLookUpVolumes reports whether csikit can answer
// ValidateVolumeCapabilities for a driver without a CapabilityValidator.
func canLookUpVolumes(s *Server) bool {
	return implements[VolumeLookup](s) || implements[VolumeGetter](s)
}

// confirmCapabilities is ValidateVolumeCapabilities for a driver without
// its own: the volume must exist (VolumeLookup, else the VolumeGetter);
// capabilities are confirmed when every one of them is served, as Options
// and the validation config say.
func confirmCapabilities(s *Server, ctx context.Context, r *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if l, ok := as[VolumeLookup](s); ok {
		if err := l.LookupVolume(ctx, r.GetVolumeId()); err != nil {
			return nil, err
		}
	} else if g, ok := as[VolumeGetter](s); ok {
		if _, err := g.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: r.GetVolumeId()}); err != nil {
			return nil, err
		}
	}
	return validation.Confirm(r, &s.vcfg), nil
}

// nodeInfoFromOptions is NodeGetInfo for a node plugin without a NodeInfoer.
func nodeInfoFromOptions(s *Server, _ context.Context, _ *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	resp := &csi.NodeGetInfoResponse{NodeId: s.opts.NodeID, MaxVolumesPerNode: s.opts.MaxVolumesPerNode}
	if len(s.opts.Topology) > 0 {
		resp.AccessibleTopology = &csi.Topology{Segments: s.opts.Topology}
	}
	return resp, nil
}

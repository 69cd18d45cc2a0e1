package csikit

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/idempotency"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The service types below are what the gRPC server registers. They only
// route: the server's gate interceptor has already answered Unimplemented
// for every RPC the driver does not serve, so the fields they call are
// never nil here.

type identityService struct {
	csi.UnimplementedIdentityServer
	s *Server
}

func (i identityService) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: i.s.opts.Name, VendorVersion: i.s.opts.Version, Manifest: i.s.opts.Manifest}, nil
}

func (i identityService) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: i.s.caps.Plugin}, nil
}

func (i identityService) Probe(ctx context.Context, req *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	// A journal that cannot write (idempotency.HealthReporter) makes the
	// plugin unhealthy: the spec's answer is FAILED_PRECONDITION.
	if h, ok := i.s.opts.Journal.(idempotency.HealthReporter); ok {
		if err := h.Err(); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "journal: %s", status.Convert(err).Message())
		}
	}
	if i.s.d.prober != nil {
		return i.s.d.prober.Probe(ctx, req)
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

type controllerService struct {
	csi.UnimplementedControllerServer
	s *Server
	d *dispatch
}

func (c controllerService) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return c.d.prov.CreateVolume(ctx, r)
}

func (c controllerService) DeleteVolume(ctx context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return c.d.prov.DeleteVolume(ctx, r)
}

func (c controllerService) ControllerPublishVolume(ctx context.Context, r *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	return c.d.ctrlPublish.ControllerPublishVolume(ctx, r)
}

func (c controllerService) ControllerUnpublishVolume(ctx context.Context, r *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	return c.d.ctrlPublish.ControllerUnpublishVolume(ctx, r)
}

func (c controllerService) ValidateVolumeCapabilities(ctx context.Context, r *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if c.d.validator != nil {
		return c.d.validator.ValidateVolumeCapabilities(ctx, r)
	}
	// Default answer: the volume must exist; capabilities are confirmed
	// when every one of them is served.
	if _, err := c.d.getter.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: r.GetVolumeId()}); err != nil {
		return nil, err
	}
	return c.s.confirm(r), nil
}

func (c controllerService) ListVolumes(ctx context.Context, r *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	return c.d.lister.ListVolumes(ctx, r)
}

func (c controllerService) ControllerListVolumeHealth(ctx context.Context, r *csi.ControllerListVolumeHealthRequest) (*csi.ControllerListVolumeHealthResponse, error) {
	return c.d.ctrlHealthLs.ControllerListVolumeHealth(ctx, r)
}

func (c controllerService) ControllerGetVolumeHealth(ctx context.Context, r *csi.ControllerGetVolumeHealthRequest) (*csi.ControllerGetVolumeHealthResponse, error) {
	return c.d.ctrlHealth.ControllerGetVolumeHealth(ctx, r)
}

func (c controllerService) GetCapacity(ctx context.Context, r *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	return c.d.capacity.GetCapacity(ctx, r)
}

func (c controllerService) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: c.s.caps.Controller}, nil
}

func (c controllerService) CreateSnapshot(ctx context.Context, r *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	return c.d.snap.CreateSnapshot(ctx, r)
}

func (c controllerService) DeleteSnapshot(ctx context.Context, r *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	return c.d.snap.DeleteSnapshot(ctx, r)
}

func (c controllerService) ListSnapshots(ctx context.Context, r *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	return c.d.snapList.ListSnapshots(ctx, r)
}

func (c controllerService) GetSnapshot(ctx context.Context, r *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	return c.d.snapGet.GetSnapshot(ctx, r)
}

func (c controllerService) ControllerExpandVolume(ctx context.Context, r *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	return c.d.ctrlExpand.ControllerExpandVolume(ctx, r)
}

func (c controllerService) ControllerGetVolume(ctx context.Context, r *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	return c.d.getter.ControllerGetVolume(ctx, r)
}

func (c controllerService) ControllerModifyVolume(ctx context.Context, r *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	return c.d.modifier.ControllerModifyVolume(ctx, r)
}

func (c controllerService) ControllerGetNodeInfo(ctx context.Context, r *csi.ControllerGetNodeInfoRequest) (*csi.ControllerGetNodeInfoResponse, error) {
	return c.d.ctrlNodeInfo.ControllerGetNodeInfo(ctx, r)
}

type groupService struct {
	csi.UnimplementedGroupControllerServer
	s *Server
	d *dispatch
}

func (g groupService) GroupControllerGetCapabilities(context.Context, *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
	return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: g.s.caps.Group}, nil
}

func (g groupService) CreateVolumeGroupSnapshot(ctx context.Context, r *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	return g.d.group.CreateVolumeGroupSnapshot(ctx, r)
}

func (g groupService) DeleteVolumeGroupSnapshot(ctx context.Context, r *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	return g.d.group.DeleteVolumeGroupSnapshot(ctx, r)
}

func (g groupService) GetVolumeGroupSnapshot(ctx context.Context, r *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	return g.d.group.GetVolumeGroupSnapshot(ctx, r)
}

type nodeService struct {
	csi.UnimplementedNodeServer
	s *Server
	d *dispatch
}

func (n nodeService) NodeStageVolume(ctx context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	return n.d.stager.NodeStageVolume(ctx, r)
}

func (n nodeService) NodeUnstageVolume(ctx context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	return n.d.stager.NodeUnstageVolume(ctx, r)
}

func (n nodeService) NodePublishVolume(ctx context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	return n.d.publisher.NodePublishVolume(ctx, r)
}

func (n nodeService) NodeUnpublishVolume(ctx context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	return n.d.publisher.NodeUnpublishVolume(ctx, r)
}

func (n nodeService) NodeGetVolumeStats(ctx context.Context, r *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	return n.d.stats.NodeGetVolumeStats(ctx, r)
}

func (n nodeService) NodeGetVolumeHealth(ctx context.Context, r *csi.NodeGetVolumeHealthRequest) (*csi.NodeGetVolumeHealthResponse, error) {
	return n.d.nodeHealth.NodeGetVolumeHealth(ctx, r)
}

func (n nodeService) NodeGetStorageHealth(ctx context.Context, r *csi.NodeGetStorageHealthRequest) (*csi.NodeGetStorageHealthResponse, error) {
	return n.d.storageHlth.NodeGetStorageHealth(ctx, r)
}

func (n nodeService) NodeExpandVolume(ctx context.Context, r *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	return n.d.nodeExpand.NodeExpandVolume(ctx, r)
}

func (n nodeService) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: n.s.caps.Node}, nil
}

func (n nodeService) NodeGetInfo(ctx context.Context, r *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	if n.d.nodeInfo != nil {
		return n.d.nodeInfo.NodeGetInfo(ctx, r)
	}
	resp := &csi.NodeGetInfoResponse{NodeId: n.s.opts.NodeID, MaxVolumesPerNode: n.s.opts.MaxVolumesPerNode}
	if len(n.s.opts.Topology) > 0 {
		resp.AccessibleTopology = &csi.Topology{Segments: n.s.opts.Topology}
	}
	return resp, nil
}

// unimplemented is the gate's answer for an RPC the server does not serve.
func unimplemented(method, driver string) error {
	return status.Errorf(codes.Unimplemented, "%s is not implemented by CSI driver %s", method, driver)
}

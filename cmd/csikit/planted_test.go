package main_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// planted is a CSI driver with bugs planted on purpose, served with plain
// gRPC (not csikit, which would redact and check for it):
//
//   - it advertises GET_VOLUME_STATS but does not serve NodeGetVolumeStats;
//   - it serves NodeExpandVolume without advertising EXPAND_VOLUME;
//   - NodeStageVolume echoes its secrets in its error message;
//   - it advertises STAGE_UNSTAGE_VOLUME, served.
type planted struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	csi.UnimplementedSnapshotMetadataServer
}

// GetMetadataAllocated streams three messages of one block each, then
// fails with the snapshot ID in the message when it is "fail-after".
func (planted) GetMetadataAllocated(req *csi.GetMetadataAllocatedRequest, st csi.SnapshotMetadata_GetMetadataAllocatedServer) error {
	if req.GetSnapshotId() == "" {
		return status.Error(codes.InvalidArgument, "snapshot_id missing")
	}
	for i := range int64(3) {
		if err := st.Send(&csi.GetMetadataAllocatedResponse{
			BlockMetadataType:   csi.BlockMetadataType_FIXED_LENGTH,
			VolumeCapacityBytes: 1 << 20,
			BlockMetadata:       []*csi.BlockMetadata{{ByteOffset: i * 4096, SizeBytes: 4096}},
		}); err != nil {
			return err
		}
	}
	if req.GetSnapshotId() == "fail-after" {
		return status.Errorf(codes.Internal, "reading snapshot failed, token %v", req.GetSecrets())
	}
	return nil
}

func (planted) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: "planted.csikit.dev", VendorVersion: "v0.0.1"}, nil
}

func (planted) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (planted) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func nodeCap(t csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
	return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}}
}

func (planted) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{
		nodeCap(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME),
		nodeCap(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS),
	}}, nil
}

func (planted) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: "planted-node"}, nil
}

func (planted) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id missing")
	}
	// The planted leak: the secrets, raw and escaped, in the message.
	return nil, status.Errorf(codes.PermissionDenied, "login refused with %v (%q)", req.GetSecrets(), req.GetSecrets())
}

func (planted) NodeUnstageVolume(context.Context, *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	return nil, status.Error(codes.InvalidArgument, "volume_id missing")
}

func (planted) NodePublishVolume(context.Context, *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	return nil, status.Error(codes.InvalidArgument, "volume_id missing")
}

func (planted) NodeUnpublishVolume(context.Context, *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	return nil, status.Error(codes.InvalidArgument, "volume_id missing")
}

func (planted) NodeExpandVolume(context.Context, *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	return nil, status.Error(codes.InvalidArgument, "volume_id missing")
}

// servePlanted serves the planted driver on a unix socket until the test
// ends and returns its endpoint.
func servePlanted(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "planted")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "csi.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	servePlantedOn(t, l)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return fmt.Sprintf("unix://%s", sock)
}

// servePlantedTCP serves the planted driver on a loopback TCP port and
// returns its endpoint.
func servePlantedTCP(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	servePlantedOn(t, l)
	return "tcp://" + l.Addr().String()
}

// servePlantedOn serves the planted driver on l until the test ends.
func servePlantedOn(t *testing.T, l net.Listener) {
	t.Helper()
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, planted{})
	csi.RegisterNodeServer(srv, planted{})
	csi.RegisterSnapshotMetadataServer(srv, planted{})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("serving the planted driver: %v", err)
		}
	})
}

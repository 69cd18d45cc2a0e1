package csitest_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csitest"
)

type node struct{ published map[string]string }

func (n *node) NodePublishVolume(_ context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	n.published[r.GetTargetPath()] = r.GetVolumeId()
	return &csi.NodePublishVolumeResponse{}, nil
}

func (n *node) NodeUnpublishVolume(_ context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	delete(n.published, r.GetTargetPath())
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func TestServesThroughTheChain(t *testing.T) {
	n := &node{published: map[string]string{}}
	s := csitest.NewServer(t, n, csikit.Options{NodeID: "node-1"})
	ctx := context.Background()

	info, err := s.Identity.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != "test.csikit.dev" {
		t.Fatalf("GetPluginInfo = %v, %v", info, err)
	}
	if !strings.HasPrefix(s.Endpoint, "unix:///") {
		t.Fatalf("Endpoint %q", s.Endpoint)
	}
	// Validation runs before the driver: a missing target path is
	// InvalidArgument and never reaches it.
	_, err = s.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "v1"})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("publish without target: %v, want InvalidArgument", err)
	}
	_, err = s.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: "v1", TargetPath: "/pods/a/volumes/v1",
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
	})
	if err != nil || n.published["/pods/a/volumes/v1"] != "v1" {
		t.Fatalf("publish: %v (driver saw %v)", err, n.published)
	}
	// Not implemented by the driver: Unimplemented from csikit.
	if _, err := s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "x"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("CreateVolume: %v, want Unimplemented", err)
	}
}

func TestCloseRemovesTheSocket(t *testing.T) {
	s, err := csitest.Start(&node{published: map[string]string{}}, csikit.Options{NodeID: "n"})
	if err != nil {
		t.Fatal(err)
	}
	sock := strings.TrimPrefix(s.Endpoint, "unix://")
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("socket: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket still there after Close: %v", err)
	}
}

func TestStartRefusesABadDriver(t *testing.T) {
	if _, err := csitest.Start(struct{}{}, csikit.Options{}); err == nil {
		t.Fatal("a value implementing no CSI service was served")
	}
}

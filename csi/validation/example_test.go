package validation_test

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/validation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

func ExampleValidate() {
	req := &csi.NodePublishVolumeRequest{
		VolumeId:   "vol-1",
		TargetPath: "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pv/mount",
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		},
	}
	err := validation.Validate(csi.Node_NodePublishVolume_FullMethodName, req, nil)
	fmt.Println(status.Code(err), status.Convert(err).Message())
	// Output: InvalidArgument NodePublishVolume: volume_capability.access_mode is required
}

func ExampleConfig() {
	// A driver of mount volumes, single-node read-write only, that can
	// create volumes from snapshots.
	cfg := &validation.Config{
		AccessTypes:    validation.Mount,
		AccessModes:    []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		ContentSources: validation.ContentSources{Snapshot: true},
	}
	req := &csi.CreateVolumeRequest{
		Name: "pvc-1",
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	}
	err := validation.Validate(csi.Controller_CreateVolume_FullMethodName, req, cfg)
	fmt.Println(status.Convert(err).Message())
	// Output: CreateVolume: volume_capabilities[0].block access type is not supported by this driver (supported: mount)
}

func ExampleUnaryServerInterceptor() {
	icpt := validation.UnaryServerInterceptor(validation.Config{AccessTypes: validation.Mount})
	// On a server: grpc.NewServer(grpc.ChainUnaryInterceptor(icpt, ...)).
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(icpt))

	// What the server does with a request that lacks its volume ID: the
	// handler never runs.
	handler := func(context.Context, any) (any, error) {
		fmt.Println("handler ran")
		return &csi.DeleteVolumeResponse{}, nil
	}
	info := &grpc.UnaryServerInfo{FullMethod: csi.Controller_DeleteVolume_FullMethodName}
	_, err := icpt(context.Background(), &csi.DeleteVolumeRequest{}, info, handler)
	fmt.Println(err)
	_, err = icpt(context.Background(), &csi.DeleteVolumeRequest{VolumeId: "vol-1"}, info, handler)
	fmt.Println(err)
	// Output:
	// rpc error: code = InvalidArgument desc = DeleteVolume: volume_id is required
	// handler ran
	// <nil>
}

func ExampleConfirm() {
	cfg := &validation.Config{AccessTypes: validation.Mount}
	mount := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}
	block := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}

	// In a driver's ValidateVolumeCapabilities, after checking that the
	// volume exists:
	resp := validation.Confirm(&csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-1", VolumeCapabilities: []*csi.VolumeCapability{mount}}, cfg)
	fmt.Println(len(resp.GetConfirmed().GetVolumeCapabilities()), "confirmed")

	resp = validation.Confirm(&csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-1", VolumeCapabilities: []*csi.VolumeCapability{mount, block}}, cfg)
	fmt.Println(resp.GetConfirmed() == nil, resp.GetMessage())
	// Output:
	// 1 confirmed
	// true ValidateVolumeCapabilities: volume_capabilities[1].block access type is not supported by this driver (supported: mount)
}

package health_test

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/health"
)

// ControllerGetVolumeHealth asks the backend; repeated conditions are merged.
func ExampleControllerVolume() {
	backend := func(ctx context.Context, id string) ([]*csi.VolumeHealth_VolumeHealthEntry, error) {
		if id != "vol-1" {
			return nil, status.Errorf(codes.NotFound, "volume %q not found", id)
		}
		return []*csi.VolumeHealth_VolumeHealthEntry{
			health.Degraded("ReplicaMissing", "replica 2 down"),
			health.Degraded("ReplicaMissing", "replica 3 down"),
		}, nil
	}
	resp, _ := health.ControllerVolume(context.Background(), &csi.ControllerGetVolumeHealthRequest{VolumeId: "vol-1"}, backend)
	for _, e := range resp.GetVolumeHealth().GetHealthStatuses() {
		fmt.Println(e.GetStatus(), e.GetReason(), e.GetMessage())
	}
	_, err := health.ControllerVolume(context.Background(), &csi.ControllerGetVolumeHealthRequest{VolumeId: "vol-9"}, backend)
	fmt.Println(status.Code(err))
	// Output:
	// DEGRADED ReplicaMissing replica 2 down; replica 3 down
	// NotFound
}

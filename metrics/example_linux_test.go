//go:build linux

package metrics_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/metrics"
	"google.golang.org/grpc/status"
)

// Hostpath-style drivers, whose volumes are plain directories, opt out of
// the mount-point check.
func ExampleStatsConfig_VolumeStats() {
	dir, _ := os.MkdirTemp("", "vol")
	defer os.RemoveAll(dir)
	resp, err := metrics.StatsConfig{AllowUnmounted: true}.VolumeStats(context.Background(), dir)
	fmt.Println(len(resp.GetUsage()) > 0, err)

	_, err = metrics.VolumeStats(context.Background(), dir)
	fmt.Println(status.Code(err))
	// Output:
	// true <nil>
	// NotFound
}

// NodeGetVolumeHealth checks the paths the CO sends.
func ExampleNodeVolumeHealth() {
	dir, _ := os.MkdirTemp("", "vol")
	defer os.RemoveAll(dir)
	resp, err := metrics.NodeVolumeHealth(context.Background(), &csi.NodeGetVolumeHealthRequest{
		VolumeId:          "vol-1",
		VolumePublishPath: dir, // a directory nothing is mounted on
	}, metrics.HealthOptions{})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range resp.GetVolumeHealth().GetHealthStatuses() {
		fmt.Println(e.GetStatus(), e.GetReason())
	}
	// Output:
	// INACCESSIBLE NotMounted
}

//go:build linux

package health_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/health"
)

// NodeGetVolumeHealth checks the paths the CO sends.
func ExampleNodeVolume() {
	dir, _ := os.MkdirTemp("", "vol")
	defer os.RemoveAll(dir)
	resp, err := health.NodeVolume(context.Background(), &csi.NodeGetVolumeHealthRequest{
		VolumeId:          "vol-1",
		VolumePublishPath: dir, // a directory nothing is mounted on
	}, health.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range resp.GetVolumeHealth().GetHealthStatuses() {
		fmt.Println(e.GetStatus(), e.GetReason())
	}
	// Output:
	// INACCESSIBLE NotMounted
}

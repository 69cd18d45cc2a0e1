//go:build linux

package stats_test

import (
	"context"
	"fmt"
	"os"

	"github.com/csikit/csikit/stats"
	"google.golang.org/grpc/status"
)

// Hostpath-style drivers, whose volumes are plain directories, opt out of
// the mount-point check.
func ExampleConfig_VolumeStats() {
	dir, _ := os.MkdirTemp("", "vol")
	defer os.RemoveAll(dir)
	resp, err := stats.Config{AllowUnmounted: true}.VolumeStats(context.Background(), dir)
	fmt.Println(len(resp.GetUsage()) > 0, err)

	_, err = stats.VolumeStats(context.Background(), dir)
	fmt.Println(status.Code(err))
	// Output:
	// true <nil>
	// NotFound
}

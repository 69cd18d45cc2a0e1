package stats_test

import (
	"context"
	"fmt"
	"log"

	"github.com/csikit/csikit/stats"
)

// A node plugin's NodeGetVolumeStats is one call; it tells block from
// filesystem volumes itself.
func ExampleVolumeStats() {
	// In NodeGetVolumeStats(ctx, req):
	resp, err := stats.VolumeStats(context.Background(), "/")
	if err != nil {
		log.Fatal(err) // a gRPC status: return it as is
	}
	for _, u := range resp.GetUsage() {
		fmt.Println(u.GetUnit(), u.GetTotal() > 0)
	}
}

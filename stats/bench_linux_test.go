//go:build linux

package stats_test

import (
	"context"
	"testing"

	"github.com/csikit/csikit/internal/testenv"

	"github.com/csikit/csikit/stats"
)

func benchStats(b *testing.B, ctx context.Context, path string) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := stats.VolumeStats(ctx, path); err != nil {
			b.Fatal(err)
		}
	}
}

// Filesystem volume: statx + statfs. "inline" is a context that cannot end
// (no goroutine); "ctx" is a cancellable one, as a gRPC handler has.
func BenchmarkVolumeStatsFilesystem(b *testing.B) {
	dir, _ := testenv.MountFS(b, "ext4", 32<<20, "")
	b.Run("inline", func(b *testing.B) { benchStats(b, context.Background(), dir) })
	b.Run("ctx", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		benchStats(b, ctx, dir)
	})
}

// Block volume: statx + open + BLKGETSIZE64 + close.
func BenchmarkVolumeStatsBlock(b *testing.B) {
	target := testenv.BindBlock(b, testenv.LoopDevice(b, 16<<20))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchStats(b, ctx, target)
}

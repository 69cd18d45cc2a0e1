//go:build linux

package metrics_test

import (
	"context"
	"testing"

	"github.com/csikit/csikit/metrics"
)

func benchStats(b *testing.B, ctx context.Context, path string) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := metrics.VolumeStats(ctx, path); err != nil {
			b.Fatal(err)
		}
	}
}

// Filesystem volume: statx + statfs. "inline" is a context that cannot end
// (no goroutine); "ctx" is a cancellable one, as a gRPC handler has.
func BenchmarkVolumeStatsFilesystem(b *testing.B) {
	dir, _ := mountFS(b, "ext4", 32<<20, "")
	b.Run("inline", func(b *testing.B) { benchStats(b, context.Background(), dir) })
	b.Run("ctx", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		benchStats(b, ctx, dir)
	})
}

// Block volume: statx + open + BLKGETSIZE64 + close.
func BenchmarkVolumeStatsBlock(b *testing.B) {
	target := bindBlock(b, loopDevice(b, 16<<20))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchStats(b, ctx, target)
}

func BenchmarkPathHealth(b *testing.B) {
	dir, _ := mountFS(b, "ext4", 32<<20, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, bc := range []struct {
		name   string
		checks metrics.HealthCheck
	}{
		{"all", metrics.AllChecks},
		{"without-writable", metrics.AllChecks &^ metrics.CheckWritable},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if e, err := metrics.PathHealth(ctx, dir, bc.checks); err != nil || len(e) != 0 {
					b.Fatal(e, err)
				}
			}
		})
	}
}

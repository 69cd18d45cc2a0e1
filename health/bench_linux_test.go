//go:build linux

package health_test

import (
	"context"
	"testing"

	"github.com/csikit/csikit/internal/testenv"

	"github.com/csikit/csikit/health"
)

func BenchmarkPathHealth(b *testing.B) {
	dir, _ := testenv.MountFS(b, "ext4", 32<<20, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, bc := range []struct {
		name   string
		checks health.Check
	}{
		{"all", health.AllChecks},
		{"without-writable", health.AllChecks &^ health.CheckWritable},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if e, err := health.Path(ctx, dir, bc.checks); err != nil || len(e) != 0 {
					b.Fatal(e, err)
				}
			}
		})
	}
}

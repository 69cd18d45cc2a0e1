//go:build linux

package block_test

import (
	"context"
	"testing"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/internal/testenv"
)

// BenchmarkLoop measures the loop-device calls the hostpath example makes
// per volume: find (on every stage, to reuse a device after a restart),
// attach+detach, and the device size.
func BenchmarkLoop(b *testing.B) {
	testenv.RequireLoopDevices(b)
	ctx := context.Background()
	dev, file := attach(b, 16<<20, block.LoopOptions{})
	b.Run("FindLoop", func(b *testing.B) {
		for b.Loop() {
			if got, ok, err := block.FindLoop(ctx, file); err != nil || !ok || got != dev {
				b.Fatalf("FindLoop: got %q, %t, %v, want %q", got, ok, err, dev)
			}
		}
	})
	b.Run("DeviceSize", func(b *testing.B) {
		for b.Loop() {
			if _, err := block.DeviceSize(dev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AttachLoop+DetachLoop", func(b *testing.B) {
		other := backingFile(b, 16<<20)
		for b.Loop() {
			d, err := block.AttachLoop(ctx, other, block.LoopOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if err := block.DetachLoop(ctx, d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

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

// BenchmarkCopySparse copies a 256 MiB sparse file holding 64 MiB of data
// (1 MiB islands every 4 MiB) onto a sparse file of the same size, and
// device to device through loop devices on the same files; MB/s counts
// the source's whole size.
func BenchmarkCopySparse(b *testing.B) {
	const size = 256 << 20
	var islands []island
	for off := int64(0); off < size; off += 4 << 20 {
		islands = append(islands, island{off, random(1 << 20)})
	}
	src := sparseImage(b, b.TempDir(), size, islands)
	dst := sparseImage(b, b.TempDir(), size, nil)
	ctx := context.Background()
	run := func(b *testing.B, dst, src string) {
		b.SetBytes(size)
		for b.Loop() {
			if _, err := block.CopySparse(ctx, dst, src, block.CopyOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("file", func(b *testing.B) { run(b, dst, src) })
	b.Run("device", func(b *testing.B) {
		testenv.RequireLoopDevices(b)
		sdev, err := block.AttachLoop(ctx, src, block.LoopOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { testenv.Detach(b, sdev) })
		ddev, err := block.AttachLoop(ctx, dst, block.LoopOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { testenv.Detach(b, ddev) })
		run(b, ddev, sdev)
	})
}

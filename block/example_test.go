//go:build linux

package block_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/csikit/csikit/block"
	"google.golang.org/grpc/status"
)

// A raw block volume backed by an image file, as the hostpath example
// driver does it: attach (or find after a restart), publish, unpublish,
// detach.
func Example() {
	ctx := context.Background()
	dev, err := block.AttachLoop(ctx, "/var/lib/hostpath/vol-1.img", block.LoopOptions{DirectIO: true})
	if err != nil {
		log.Print(err)
		return
	}
	target := "/var/lib/kubelet/pods/uid/volumeDevices/kubernetes.io~csi/vol-1"
	if err := block.MountBlock(ctx, block.MountOptions{Device: dev, Target: target}); err != nil {
		log.Print(err)
		return
	}
	size, _ := block.DeviceSize(target)
	log.Printf("published %s (%d bytes) at %s", dev, size, target)
	if err := block.UnmountBlock(ctx, target); err != nil {
		log.Print(err)
		return
	}
	if err := block.DetachLoop(ctx, dev); err != nil {
		log.Print(err)
	}
}

// A directory where a block volume should go is refused with a code a CSI
// handler can return as-is.
func ExampleEnsureBlock() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	err := block.EnsureBlock(context.Background(), dir)
	fmt.Println(status.Code(err))
	// Output: FailedPrecondition
}

// Zeroing the first MiB of a volume (a device or an image file) before
// handing it to a new tenant; a range past its end is refused with
// OutOfRange naming its size.
func ExampleZeroRange() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	img := filepath.Join(dir, "vol.img")
	_ = os.WriteFile(img, bytes.Repeat([]byte("old tenant data\n"), 1<<17), 0o600) // 2 MiB
	ctx := context.Background()
	if err := block.ZeroRange(ctx, img, 0, 1<<20); err != nil {
		log.Print(err)
		return
	}
	b, _ := os.ReadFile(img)
	fmt.Println(bytes.Count(b[:1<<20], []byte{0}), string(b[1<<20:1<<20+15]))
	err := block.ZeroRange(ctx, img, 1<<20, 4<<20)
	fmt.Println(status.Code(err))
	// Output:
	// 1048576 old tenant data
	// OutOfRange
}

// A clone of a volume: the source's holes stay holes in the copy, and
// whatever the destination held before is gone.
func ExampleCopySparse() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	src, dst := filepath.Join(dir, "src.img"), filepath.Join(dir, "clone.img")
	f, _ := os.Create(src)
	_ = f.Truncate(64 << 20)                    // 64 MiB, sparse
	_, _ = f.WriteAt([]byte("superblock"), 0)   // data at the start
	_, _ = f.WriteAt([]byte("journal"), 32<<20) // and in the middle
	f.Close()
	_ = os.WriteFile(dst, bytes.Repeat([]byte{0xff}, 64<<20), 0o600) // stale data
	res, err := block.CopySparse(context.Background(), dst, src, block.CopyOptions{})
	if err != nil {
		log.Print(err)
		return
	}
	a, _ := os.ReadFile(src)
	b, _ := os.ReadFile(dst)
	fmt.Println(bytes.Equal(a, b), res.Written <= 2*4096)
	// Output: true true
}

//go:build linux

package block_test

import (
	"context"
	"fmt"
	"log"
	"os"

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

//go:build linux

package mount_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/csikit/csikit/mount"
	"google.golang.org/grpc/status"
)

// A node plugin's stage, publish, unpublish and unstage, end to end. Errors
// carry gRPC codes, so a CSI handler returns them unchanged.
func Example() {
	ctx := context.Background()
	m := mount.New(mount.Options{Logger: slog.Default()})
	staging := "/var/lib/kubelet/plugins/kubernetes.io/csi/example/vol-1/globalmount"
	target := "/var/lib/kubelet/pods/uid/volumes/kubernetes.io~csi/vol-1/mount"

	// NodeStageVolume: format /dev/loop3 if blank, mount it.
	err := m.Stage(ctx, mount.StageOptions{
		Device: "/dev/loop3", Target: staging, FSType: "ext4",
		MountFlags: []string{"noatime"},
	})
	if err != nil {
		log.Print(err) // e.g. FailedPrecondition: the device holds xfs
		return
	}
	// NodePublishVolume: bind it to the pod, read-only.
	if err := m.Publish(ctx, mount.PublishOptions{Source: staging, Target: target, ReadOnly: true}); err != nil {
		log.Print(err)
		return
	}
	// NodeUnpublishVolume and NodeUnstageVolume.
	if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
		log.Print(err)
		return
	}
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		log.Print(err)
	}
}

// Bad paths from a request are refused before anything is touched.
func ExampleMounter_Publish() {
	m := mount.New(mount.Options{})
	err := m.Publish(context.Background(), mount.PublishOptions{
		Source: "/staging/vol-1",
		Target: "/var/lib/kubelet/pods/../../../etc",
	})
	fmt.Println(status.Code(err))
	// Output: InvalidArgument
}

// A scripted Runner answers for blkid, as unit tests do.
func ExampleNew() {
	blkid := mount.RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return []byte("DEVNAME=/dev/vdb\nTYPE=xfs\n"), nil
	})
	m := mount.New(mount.Options{Runner: blkid})
	format, err := m.DiskFormat(context.Background(), "/dev/vdb")
	fmt.Println(format, err)
	// Output: xfs <nil>
}

func ExampleMounter_IsMountPoint() {
	m := mount.New(mount.Options{})
	isMnt, err := m.IsMountPoint(context.Background(), "/")
	fmt.Println(isMnt, err)
	// Output: true <nil>
}

// NodeExpandVolume: grow the file system after the device grew.
func ExampleMounter_Resize() {
	m := mount.New(mount.Options{})
	grew, err := m.Resize(context.Background(), mount.ResizeOptions{
		Device: "/dev/loop3",
		Path:   "/var/lib/kubelet/plugins/kubernetes.io/csi/example/vol-1/globalmount",
	})
	if err != nil {
		log.Print(err)
		return
	}
	log.Printf("file system grew: %t", grew)
}

// A controller rounds a small xfs volume up to what mkfs.xfs can format,
// or refuses it at CreateVolume when the capacity range's limit is lower.
func ExampleFitSize() {
	const mib = 1 << 20
	size, err := mount.FitSize("xfs", 64*mib, 0, 300*mib)
	fmt.Println(size/mib, err)
	_, err = mount.FitSize("xfs", 64*mib, 100*mib, 300*mib)
	fmt.Println(status.Code(err))
	// Output:
	// 300 <nil>
	// OutOfRange
}

// CreateVolume from a snapshot into a larger volume: grow the copy's
// file system in its backing file, before a loop device is attached. A
// file holding no ext file system (here a blank one, which the first
// stage formats at its full size) is left alone.
func ExampleMounter_GrowOffline() {
	dir, err := os.MkdirTemp("", "grow")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	img := filepath.Join(dir, "vol-1.img")
	if err := os.WriteFile(img, make([]byte, 4096), 0o600); err != nil {
		log.Fatal(err)
	}
	m := mount.New(mount.Options{})
	res, err := m.GrowOffline(context.Background(), mount.GrowOfflineOptions{Path: img})
	fmt.Println(res.Before, res.After, err)
	// Output: 0 0 <nil>
}

//go:build linux

package block_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/csikit/csikit/block"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/testenv"
)

func unmountAtCleanup(t *testing.T, target string) {
	t.Cleanup(func() {
		for i := 0; i < 8 && isMounted(t, target); i++ {
			_ = unix.Unmount(target, unix.MNT_DETACH)
		}
	})
}

func TestMountBlock(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	const size = 32 << 20
	dev, _ := attach(t, size, block.LoopOptions{})
	target := filepath.Join(t.TempDir(), "pods", "vol")
	unmountAtCleanup(t, target)

	opts := block.MountOptions{Device: dev, Target: target}
	for i := 0; i < 2; i++ {
		if err := block.MountBlock(ctx, opts); err != nil {
			t.Fatalf("MountBlock #%d: %v", i+1, err)
		}
	}
	if !isMounted(t, target) {
		t.Fatalf("target %s: got not a mount point, want the device bound there", target)
	}
	// The target is the device: its size is the device's, and data written
	// through it reaches the device.
	if got, err := block.DeviceSize(target); err != nil || got != size {
		t.Fatalf("DeviceSize(target): got %d, %v, want %d", got, err, size)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(target, &sfs); err != nil {
		t.Fatal(err)
	}
	if statfsSize := int64(sfs.Blocks) * sfs.Bsize; statfsSize == size {
		t.Logf("statfs happens to report %d too", statfsSize)
	}
	msg := []byte("through the bind mount")
	f, err := os.OpenFile(target, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(msg, 4096); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	buf := make([]byte, len(msg))
	d, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadAt(buf, 4096); err != nil {
		t.Fatal(err)
	}
	d.Close()
	if !bytes.Equal(buf, msg) {
		t.Fatalf("read from device: got %q, want %q", buf, msg)
	}

	// Incompatible retries are refused.
	testenv.WantCode(t, block.MountBlock(ctx, block.MountOptions{Device: dev, Target: target, ReadOnly: true}), codes.AlreadyExists)
	other, _ := attach(t, size, block.LoopOptions{})
	testenv.WantCode(t, block.MountBlock(ctx, block.MountOptions{Device: other, Target: target}), codes.AlreadyExists)

	for i := 0; i < 2; i++ {
		if err := block.UnmountBlock(ctx, target); err != nil {
			t.Fatalf("UnmountBlock #%d: %v", i+1, err)
		}
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("target after UnmountBlock: got %v, want removed", err)
	}
}

func TestMountBlockReadOnly(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	dev, _ := attach(t, 16<<20, block.LoopOptions{})
	target := filepath.Join(t.TempDir(), "vol")
	unmountAtCleanup(t, target)
	opts := block.MountOptions{Device: dev, Target: target, ReadOnly: true}
	if err := block.MountBlock(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if err := block.MountBlock(ctx, opts); err != nil {
		t.Fatalf("MountBlock again: got %v, want nil", err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(target, &sfs); err != nil {
		t.Fatal(err)
	}
	if sfs.Flags&unix.ST_RDONLY == 0 {
		t.Fatalf("statfs flags of %s: got %#x, want ST_RDONLY", target, sfs.Flags)
	}
	testenv.WantCode(t, block.MountBlock(ctx, block.MountOptions{Device: dev, Target: target}), codes.AlreadyExists)
	if err := block.UnmountBlock(ctx, target); err != nil {
		t.Fatal(err)
	}
}

func TestUnmountBlockBusyAndStacked(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	dev, _ := attach(t, 16<<20, block.LoopOptions{})
	target := filepath.Join(t.TempDir(), "vol")
	unmountAtCleanup(t, target)
	if err := block.MountBlock(ctx, block.MountOptions{Device: dev, Target: target}); err != nil {
		t.Fatal(err)
	}
	// Stack a second bind on top, as a buggy retry elsewhere might.
	if err := unix.Mount(dev, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	// An open file makes the mount busy: refused, and the target stays.
	f, err := os.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WantCode(t, block.UnmountBlock(ctx, target), codes.FailedPrecondition)
	f.Close()
	if _, err := os.Lstat(target); err != nil {
		t.Fatalf("target after a busy UnmountBlock: got %v, want it kept", err)
	}
	if err := block.UnmountBlock(ctx, target); err != nil {
		t.Fatalf("UnmountBlock with stacked binds: %v", err)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("target after UnmountBlock: got %v, want removed", err)
	}
}

//go:build linux

package block_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/internal/testenv"
)

// TestDetachLoopInUse: LOOP_CLR_FD on a device someone holds open succeeds
// and only marks it for detaching on last close. DetachLoop must say the
// device is in use, and leave it as it was: attached, without autoclear.
func TestDetachLoopInUse(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	dev, file := attach(t, 16<<20, block.LoopOptions{})
	holder, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()

	err = block.DetachLoop(ctx, dev)
	if code := status.Code(err); code != codes.FailedPrecondition {
		t.Fatalf("DetachLoop of an open device: got %v (%v), want FailedPrecondition", code, err)
	}
	if !strings.Contains(err.Error(), dev) {
		t.Errorf("error %q does not name %s", err, dev)
	}
	if want := fmt.Sprintf("open by pid %d", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the holder (%s)", err, want)
	}
	info, err := unix.IoctlLoopGetStatus64(int(holder.Fd()))
	if err != nil {
		t.Fatalf("device detached after a refused DetachLoop: %v", err)
	}
	if info.Flags&unix.LO_FLAGS_AUTOCLEAR != 0 {
		t.Fatalf("refused DetachLoop left autoclear set (flags %#x)", info.Flags)
	}
	if found, ok, err := block.FindLoop(ctx, file); err != nil || !ok || found != dev {
		t.Fatalf("FindLoop after a refused detach: %q, %t, %v", found, ok, err)
	}
	// The holder lets go: now it detaches, synchronously.
	holder.Close()
	if err := block.DetachLoop(ctx, dev); err != nil {
		t.Fatalf("DetachLoop once closed: %v", err)
	}
	if _, ok, err := block.FindLoop(ctx, file); err != nil || ok {
		t.Fatalf("FindLoop after DetachLoop: %t, %v, want detached", ok, err)
	}
}

// TestUnmountBlockRemovesOnlyEmptyFile: after unmounting, UnmountBlock
// removes the empty file EnsureBlock made, and nothing else: a file holding
// data or a symlink at the target stays, with FailedPrecondition.
func TestUnmountBlockRemovesOnlyEmptyFile(t *testing.T) {
	ctx := context.Background()
	d := t.TempDir()
	data := d + "/data"
	if err := os.WriteFile(data, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.WantCode(t, block.UnmountBlock(ctx, data), codes.FailedPrecondition)
	if b, err := os.ReadFile(data); err != nil || string(b) != "precious" {
		t.Fatalf("file after UnmountBlock: %q, %v", b, err)
	}
	link := d + "/link"
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	testenv.WantCode(t, block.UnmountBlock(ctx, link), codes.FailedPrecondition)
	if _, err := os.Lstat(link); err != nil {
		t.Fatalf("symlink removed: %v", err)
	}
	empty := d + "/empty"
	if err := block.EnsureBlock(ctx, empty); err != nil {
		t.Fatal(err)
	}
	if err := block.UnmountBlock(ctx, empty); err != nil {
		t.Fatalf("UnmountBlock of an empty target: %v", err)
	}
	if _, err := os.Lstat(empty); !os.IsNotExist(err) {
		t.Fatalf("empty target after UnmountBlock: %v, want removed", err)
	}
}

// TestMountBlockRefusesSymlinks: a symlinked parent of the target (or a
// symlink as the target) is refused with FailedPrecondition; nothing is
// created or bound behind it, and UnmountBlock does not go through it
// either.
func TestMountBlockRefusesSymlinks(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	dev, _ := attach(t, 16<<20, block.LoopOptions{})
	d := t.TempDir()
	elsewhere := d + "/elsewhere"
	if err := os.MkdirAll(elsewhere, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(elsewhere+"/file", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(d+"/pods", 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, d+"/pods/uid"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range []string{elsewhere + "/file", elsewhere + "/new/dev"} {
			for isMounted(t, p) {
				if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
					t.Errorf("cleanup: %v", err)
					break
				}
			}
		}
	})
	for _, target := range []string{d + "/pods/uid/file", d + "/pods/uid/new/dev"} {
		err := block.MountBlock(ctx, block.MountOptions{Device: dev, Target: target})
		testenv.WantCode(t, err, codes.FailedPrecondition)
		if !strings.Contains(err.Error(), "symlink") {
			t.Errorf("error %v does not say why", err)
		}
	}
	if isMounted(t, elsewhere+"/file") {
		t.Fatal("the device was bound behind the symlink")
	}
	if _, err := os.Lstat(elsewhere + "/new"); !os.IsNotExist(err) {
		t.Fatalf("MountBlock created a directory behind the symlink: %v", err)
	}
	testenv.WantCode(t, block.UnmountBlock(ctx, d+"/pods/uid/file"), codes.FailedPrecondition)
	if _, err := os.Lstat(elsewhere + "/file"); err != nil {
		t.Fatalf("UnmountBlock removed the file behind the symlink: %v", err)
	}
}

// TestDetachLoopMounted: a device holding a mounted file system is in use,
// and the refusal names the mount point; once unmounted it detaches.
func TestDetachLoopMounted(t *testing.T) {
	testenv.RequireLoopDevices(t)
	testenv.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
	ctx := context.Background()
	dev, file := attach(t, 32<<20, block.LoopOptions{})
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", dev).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	mnt := t.TempDir()
	if err := unix.Mount(dev, mnt, "ext4", 0, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if isMounted(t, mnt) {
			_ = unix.Unmount(mnt, unix.MNT_DETACH)
		}
	})
	err := block.DetachLoop(ctx, dev)
	testenv.WantCode(t, err, codes.FailedPrecondition)
	if !strings.Contains(err.Error(), "mounted at "+mnt) {
		t.Errorf("refusal %q does not name the mount point %s", err, mnt)
	}
	if _, ok, err := block.FindLoop(ctx, file); err != nil || !ok {
		t.Fatalf("device gone after a refused detach: %t, %v", ok, err)
	}
	if err := unix.Unmount(mnt, 0); err != nil {
		t.Fatal(err)
	}
	if err := block.DetachLoop(ctx, dev); err != nil {
		t.Fatalf("DetachLoop after unmounting: %v", err)
	}
	if _, ok, err := block.FindLoop(ctx, file); err != nil || ok {
		t.Fatalf("FindLoop after DetachLoop: %t, %v, want detached", ok, err)
	}
}

// TestDetachLoopWaitsOutTransientOpen: an open that ends by itself (udev's
// blkid after a size change) does not fail the detach: DetachLoop retries
// and detaches once the holder lets go.
func TestDetachLoopWaitsOutTransientOpen(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	dev, file := attach(t, 16<<20, block.LoopOptions{})
	holder, err := os.OpenFile(dev, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(300 * time.Millisecond)
		holder.Close()
	}()
	err = block.DetachLoop(ctx, dev)
	<-done
	if err != nil {
		t.Fatalf("DetachLoop while a holder closes within the retry window: %v", err)
	}
	if _, ok, err := block.FindLoop(ctx, file); err != nil || ok {
		t.Fatalf("FindLoop after DetachLoop: %t, %v, want detached", ok, err)
	}
}

// TestDetachLoopBindMounted: a published raw block volume is the loop's
// device node bound onto a file (MountBlock). A bind mount of a device node
// does not open the device, so the kernel detaches it without a word and
// the pod's volume is gone. DetachLoop must refuse, naming the target.
func TestDetachLoopBindMounted(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	dev, file := attach(t, 16<<20, block.LoopOptions{})
	target := t.TempDir() + "/pod-volume"
	if err := block.MountBlock(ctx, block.MountOptions{Device: dev, Target: target}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if isMounted(t, target) {
			_ = unix.Unmount(target, unix.MNT_DETACH)
		}
	})
	err := block.DetachLoop(ctx, dev)
	testenv.WantCode(t, err, codes.FailedPrecondition)
	if err != nil && !strings.Contains(err.Error(), target) {
		t.Errorf("refusal %q does not name the bind target %s", err, target)
	}
	if _, ok, err := block.FindLoop(ctx, file); err != nil || !ok {
		t.Fatalf("device gone after a refused detach: %t, %v", ok, err)
	}
	if err := block.UnmountBlock(ctx, target); err != nil {
		t.Fatal(err)
	}
	if err := block.DetachLoop(ctx, dev); err != nil {
		t.Fatalf("DetachLoop after unpublishing: %v", err)
	}
	if _, ok, err := block.FindLoop(ctx, file); err != nil || ok {
		t.Fatalf("FindLoop after DetachLoop: %t, %v, want detached", ok, err)
	}
}

//go:build linux

package block_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csikit/csikit/block"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/testenv"
)

func TestLoopAttachFindDetach(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	const size = 64 << 20
	dev, file := attach(t, size, block.LoopOptions{})
	if !strings.HasPrefix(dev, "/dev/loop") {
		t.Fatalf("got device %q, want /dev/loopN", dev)
	}
	got, err := block.DeviceSize(dev)
	if err != nil {
		t.Fatal(err)
	}
	if got != size {
		t.Fatalf("DeviceSize(%s): got %d, want %d", dev, got, size)
	}

	// Growing the backing file and refreshing grows the device.
	if err := os.Truncate(file, 2*size); err != nil {
		t.Fatal(err)
	}
	if err := block.RefreshLoopSize(ctx, dev); err != nil {
		t.Fatalf("RefreshLoopSize: %v", err)
	}
	if got, err := block.DeviceSize(dev); err != nil || got != 2*size {
		t.Fatalf("DeviceSize after growing: got %d, %v, want %d", got, err, 2*size)
	}

	found, ok, err := block.FindLoop(ctx, file)
	if err != nil || !ok || found != dev {
		t.Fatalf("FindLoop: got %q, %t, %v, want %q, true, nil", found, ok, err, dev)
	}
	again, err := block.AttachLoop(ctx, file, block.LoopOptions{})
	if err != nil || again != dev {
		t.Fatalf("AttachLoop again: got %q, %v, want the same device %q", again, err, dev)
	}

	// A renamed backing file is still found: matching is by inode.
	renamed := filepath.Join(filepath.Dir(file), strings.Repeat("long-name-", 10)+".img")
	if err := os.Rename(file, renamed); err != nil {
		t.Fatal(err)
	}
	if found, ok, err := block.FindLoop(ctx, renamed); err != nil || !ok || found != dev {
		t.Fatalf("FindLoop after rename: got %q, %t, %v, want %q, true, nil", found, ok, err, dev)
	}

	if err := block.DetachLoop(ctx, dev); err != nil {
		t.Fatalf("DetachLoop: %v", err)
	}
	if err := block.DetachLoop(ctx, dev); err != nil {
		t.Fatalf("DetachLoop twice: got %v, want nil", err)
	}
	if found, ok, err := block.FindLoop(ctx, renamed); err != nil || ok {
		t.Fatalf("FindLoop after detach: got %q, %t, %v, want not found", found, ok, err)
	}
}

func TestLoopOptions(t *testing.T) {
	testenv.RequireLoopDevices(t)
	dev, _ := attach(t, 16<<20, block.LoopOptions{ReadOnly: true, DirectIO: true})
	name := strings.TrimPrefix(dev, "/dev/")
	ro, err := os.ReadFile("/sys/block/" + name + "/ro")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(ro)) != "1" {
		t.Fatalf("/sys/block/%s/ro: got %q, want 1", name, ro)
	}
	dio, err := os.ReadFile("/sys/block/" + name + "/loop/dio")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(dio)) != "1" {
		t.Logf("direct I/O not enabled by the kernel (backing file system may not support O_DIRECT): dio=%q", dio)
	}
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteAt(make([]byte, 4096), 0)
		f.Close()
	}
	if err == nil {
		t.Fatalf("writing to read-only loop device %s: got success, want an error", dev)
	}
}

func TestAttachLoopErrors(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	_, err := block.AttachLoop(ctx, filepath.Join(t.TempDir(), "missing.img"), block.LoopOptions{})
	testenv.WantCode(t, err, codes.NotFound)
	_, err = block.AttachLoop(ctx, t.TempDir(), block.LoopOptions{})
	testenv.WantCode(t, err, codes.InvalidArgument)
	_, _, err = block.FindLoop(ctx, filepath.Join(t.TempDir(), "missing.img"))
	testenv.WantCode(t, err, codes.NotFound)
}

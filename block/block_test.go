//go:build linux

package block_test

import (
	"context"
	"errors"
	"github.com/csikit/csikit/internal/testenv"
	"os"
	"path/filepath"
	"testing"

	"github.com/csikit/csikit/block"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// backingFile creates a sparse file of size bytes.
func backingFile(t testing.TB, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return p
}

// attach attaches a loop device to a fresh backing file and detaches it at
// the end of the test.
func attach(t testing.TB, size int64, opts block.LoopOptions) (dev, file string) {
	t.Helper()
	file = backingFile(t, size)
	dev, err := block.AttachLoop(context.Background(), file, opts)
	if err != nil {
		t.Fatalf("AttachLoop: %v", err)
	}
	t.Cleanup(func() {
		if err := block.DetachLoop(context.Background(), dev); err != nil {
			t.Errorf("DetachLoop(%s): %v", dev, err)
		}
	})
	return dev, file
}

func isMounted(t testing.TB, path string) bool {
	t.Helper()
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE, &stx)
	if errors.Is(err, unix.ENOENT) {
		return false
	}
	if err != nil {
		t.Fatalf("statx %s: %v", path, err)
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		testenv.Skip(t, "needs statx STATX_ATTR_MOUNT_ROOT (Linux 5.8+) to verify mounts")
	}
	return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
}

func TestBadPaths(t *testing.T) {
	ctx := context.Background()
	for _, p := range []string{"", "relative/x", "/a/../etc/passwd", "/a//b", "/a/\x00b"} {
		if err := block.EnsureBlock(ctx, p); status.Code(err) != codes.InvalidArgument {
			t.Errorf("EnsureBlock(%q): got %v, want InvalidArgument", p, err)
		}
		if err := block.UnmountBlock(ctx, p); status.Code(err) != codes.InvalidArgument {
			t.Errorf("UnmountBlock(%q): got %v, want InvalidArgument", p, err)
		}
		if err := block.MountBlock(ctx, block.MountOptions{Device: "/dev/null", Target: p}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("MountBlock(target %q): got %v, want InvalidArgument", p, err)
		}
		if _, err := block.AttachLoop(ctx, p, block.LoopOptions{}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("AttachLoop(%q): got %v, want InvalidArgument", p, err)
		}
	}
	for _, dev := range []string{"/dev/sda", "/dev/loop", "/dev/loopx", "/dev/loop1/../sda"} {
		if err := block.DetachLoop(ctx, dev); status.Code(err) != codes.InvalidArgument {
			t.Errorf("DetachLoop(%q): got %v, want InvalidArgument", dev, err)
		}
	}
}

func TestEnsureBlock(t *testing.T) {
	ctx := context.Background()
	target := filepath.Join(t.TempDir(), "a", "b", "vol")
	for i := 0; i < 2; i++ { // the second call checks idempotency
		if err := block.EnsureBlock(ctx, target); err != nil {
			t.Fatalf("EnsureBlock #%d: %v", i+1, err)
		}
		fi, err := os.Lstat(target)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			t.Fatalf("got mode %v, want a regular file", fi.Mode())
		}
	}
	dir := t.TempDir()
	testenv.WantCode(t, block.EnsureBlock(ctx, dir), codes.FailedPrecondition)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	testenv.WantCode(t, block.EnsureBlock(ctx, link), codes.FailedPrecondition)
}

func TestUnmountBlockNeverRemovesDirectory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(data, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	testenv.WantCode(t, block.UnmountBlock(ctx, dir), codes.FailedPrecondition)
	if _, err := os.Stat(data); err != nil {
		t.Fatalf("data below the directory: got %v, want it kept", err)
	}
	if err := block.UnmountBlock(ctx, filepath.Join(dir, "missing")); err != nil {
		t.Fatalf("UnmountBlock of a missing target: got %v, want nil", err)
	}
}

func TestMountBlockMissingDevice(t *testing.T) {
	ctx := context.Background()
	target := filepath.Join(t.TempDir(), "vol")
	testenv.WantCode(t, block.MountBlock(ctx, block.MountOptions{Device: "/dev/does-not-exist", Target: target}), codes.NotFound)
	testenv.WantCode(t, block.MountBlock(ctx, block.MountOptions{Device: "/dev/null", Target: target}), codes.InvalidArgument)
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("target after refused MountBlock: got %v, want not created", err)
	}
}

func TestCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	target := filepath.Join(t.TempDir(), "vol")
	testenv.WantCode(t, block.EnsureBlock(ctx, target), codes.Canceled)
}

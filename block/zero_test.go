//go:build linux

package block_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/internal/testenv"
)

// patterned writes size bytes of b to a new file and returns its path.
func patterned(t testing.TB, dir string, size int, b byte) string {
	t.Helper()
	p := filepath.Join(dir, "data.img")
	if err := os.WriteFile(p, bytes.Repeat([]byte{b}, size), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// allocated is the bytes of disk the file at path occupies.
func allocated(t testing.TB, path string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Blocks) * 512
}

func readAll(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantZeroed checks that got reads zero in [off, off+n) and b elsewhere.
func wantZeroed(t testing.TB, got []byte, off, n int, b byte) {
	t.Helper()
	for i, c := range got {
		want := b
		if i >= off && i < off+n {
			want = 0
		}
		if c != want {
			t.Fatalf("byte %d: got %#x, want %#x (zeroed range [%d, %d))", i, c, want, off, off+n)
		}
	}
}

func TestZeroRange(t *testing.T) {
	const size, off, n = 4 << 20, 1<<20 + 512, 3*512 + 2<<20
	ctx := context.Background()
	for _, offload := range []bool{true, false} {
		name := "offloaded"
		if !offload {
			name = "written"
		}
		t.Run(name, func(t *testing.T) {
			defer block.SetZeroOffload(offload)()
			t.Run("file", func(t *testing.T) {
				p := patterned(t, t.TempDir(), size, 0xab)
				before := allocated(t, p)
				if err := block.ZeroRange(ctx, p, off, n); err != nil {
					t.Fatal(err)
				}
				wantZeroed(t, readAll(t, p), off, n, 0xab)
				// A punched hole frees the blocks (all but the partial
				// file-system blocks at its ends); written zeros do not.
				if after := allocated(t, p); offload && after > before-n+2*4096 {
					t.Fatalf("allocated %d bytes after zeroing %d of %d: want the range freed", after, n, before)
				}
			})
			t.Run("loop device", func(t *testing.T) {
				testenv.RequireLoopDevices(t)
				p := patterned(t, t.TempDir(), size, 0xcd)
				dev, err := block.AttachLoop(ctx, p, block.LoopOptions{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { testenv.Detach(t, dev) })
				if err := block.ZeroRange(ctx, dev, off, n); err != nil {
					t.Fatal(err)
				}
				wantZeroed(t, readAll(t, dev), off, n, 0xcd)
			})
		})
	}
}

func TestZeroRangeRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := patterned(t, dir, 1<<20, 0xab)
	testenv.WantCode(t, block.ZeroRange(ctx, p, 100, 512), codes.InvalidArgument)
	testenv.WantCode(t, block.ZeroRange(ctx, p, 0, 1000), codes.InvalidArgument)
	testenv.WantCode(t, block.ZeroRange(ctx, p, -512, 512), codes.InvalidArgument)
	st := testenv.WantCode(t, block.ZeroRange(ctx, p, 1<<20-512, 1024), codes.OutOfRange)
	if !strings.Contains(st.Message(), "1048576 bytes") {
		t.Fatalf("message %q: want the size, 1048576 bytes", st.Message())
	}
	testenv.WantCode(t, block.ZeroRange(ctx, filepath.Join(dir, "missing"), 0, 512), codes.NotFound)
	testenv.WantCode(t, block.ZeroRange(ctx, dir, 0, 512), codes.InvalidArgument)
	testenv.WantCode(t, block.ZeroRange(ctx, "dev/loop0", 0, 512), codes.InvalidArgument)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	testenv.WantCode(t, block.ZeroRange(cctx, p, 0, 512), codes.Canceled)
	wantZeroed(t, readAll(t, p), 0, 0, 0xab)
}

// TestZeroRangeSymlinkSwap: the path a driver checked is replaced by a
// symlink to another file or device; ZeroRange refuses it and the target
// keeps its bytes.
func TestZeroRangeSymlinkSwap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	victim := patterned(t, t.TempDir(), 1<<20, 0xee)
	path := filepath.Join(dir, "volume.img")
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	testenv.WantCode(t, block.ZeroRange(ctx, path, 0, 1<<20), codes.FailedPrecondition)
	wantZeroed(t, readAll(t, victim), 0, 0, 0xee)

	testenv.RequireLoopDevices(t)
	dev := testenv.LoopDevice(t, 1<<20)
	link := filepath.Join(dir, "dev")
	if err := os.Symlink(dev, link); err != nil {
		t.Fatal(err)
	}
	testenv.WantCode(t, block.ZeroRange(ctx, link, 0, 512), codes.FailedPrecondition)
}

// TestZeroRangeMountedDevice: a device with a mounted file system is
// refused, not zeroed under the file system.
func TestZeroRangeMountedDevice(t *testing.T) {
	_, dev := testenv.MountFS(t, "ext4", 16<<20, "")
	st := testenv.WantCode(t, block.ZeroRange(context.Background(), dev, 0, 4096), codes.FailedPrecondition)
	if !strings.Contains(st.Message(), "in use") {
		t.Fatalf("message %q: want it to say the device is in use", st.Message())
	}
}

//go:build linux

package block_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/internal/testenv"
)

// island is data at an offset of a sparse test image.
type island struct {
	off  int64
	data []byte
}

// sparseImage makes a sparse file of size bytes holding the islands and
// returns its path.
func sparseImage(t testing.TB, dir string, size int64, islands []island) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "src-*.img")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	for _, is := range islands {
		if _, err := f.WriteAt(is.data, is.off); err != nil {
			t.Fatal(err)
		}
	}
	return f.Name()
}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// garbage makes a fully allocated file of size random bytes.
func garbage(t testing.TB, dir string, size int) string {
	t.Helper()
	p := filepath.Join(dir, "dst.img")
	if err := os.WriteFile(p, random(size), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func testIslands() []island {
	return []island{
		{0, random(64 << 10)},
		{5 << 20, random(1<<20 + 123)},                   // crosses chunks, ends mid-block
		{20<<20 + 4096, random(4096)},                    // one block inside a chunk
		{30 << 20, make([]byte, 2<<20)},                  // allocated zeros: skipped
		{40<<20 - 512, bytes.Repeat([]byte{0x5a}, 1024)}, // across a chunk boundary
		{64<<20 - 4096, random(4096)},                    // the last block
	}
}

// TestCopySparse copies a source with data islands and holes onto a
// destination full of garbage, for each pair of file and loop device.
func TestCopySparse(t *testing.T) {
	const size = 64 << 20
	ctx := context.Background()
	for _, tc := range []struct {
		name             string
		srcDev, dstDev   bool
		dstExtra         int
		destinationClean bool
	}{
		{name: "file to file"},
		{name: "file to larger file", dstExtra: 1 << 20},
		{name: "file to new sparse file", destinationClean: true},
		{name: "device to device", srcDev: true, dstDev: true},
		{name: "file to device", dstDev: true, dstExtra: 4 << 20},
		{name: "device to file", srcDev: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.srcDev || tc.dstDev {
				testenv.RequireLoopDevices(t)
			}
			src := sparseImage(t, t.TempDir(), size, testIslands())
			want := readAll(t, src)
			var dst string
			if tc.destinationClean {
				dst = sparseImage(t, t.TempDir(), size, nil)
			} else {
				dst = garbage(t, t.TempDir(), size+tc.dstExtra)
			}
			tail := readAll(t, dst)[size:]
			srcPath, dstPath := src, dst
			if tc.srcDev {
				srcPath = attachFile(t, src)
			}
			if tc.dstDev {
				dstPath = attachFile(t, dst)
			}
			res, err := block.CopySparse(ctx, dstPath, srcPath, block.CopyOptions{DestinationZeroed: tc.destinationClean})
			if err != nil {
				t.Fatal(err)
			}
			got := readAll(t, dstPath)
			if !bytes.Equal(got[:size], want) {
				t.Fatalf("destination differs from the source at byte %d", firstDiff(got[:size], want))
			}
			if !bytes.Equal(got[size:], tail) {
				t.Fatal("destination beyond the source's size was changed")
			}
			if res.Size != size || res.Written > 4<<20 {
				t.Fatalf("got %+v, want Size %d and at most the islands' 4 MiB written", res, size)
			}
			if !tc.dstDev {
				// The copy is as sparse as the source's data, minus the
				// source's allocated zeros, give or take a block per island.
				srcData := allocated(t, src) - 2<<20 + tc.dstExtra
				if got := allocated(t, dst); math.Abs(float64(got-srcData)) > 64<<10 {
					t.Fatalf("destination allocates %d bytes, want about %d (the source's data)", got, srcData)
				}
			}
		})
	}
}

func attachFile(t *testing.T, file string) string {
	t.Helper()
	dev, err := block.AttachLoop(context.Background(), file, block.LoopOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.Detach(t, dev) })
	return dev
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestCopySparseRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := sparseImage(t, dir, 2<<20, []island{{0, random(4096)}})
	small := garbage(t, t.TempDir(), 1<<20)
	st := testenv.WantCode(t, errOf(block.CopySparse(ctx, small, src, block.CopyOptions{})), codes.OutOfRange)
	if !strings.Contains(st.Message(), "1048576 bytes") || !strings.Contains(st.Message(), "2097152 bytes") {
		t.Fatalf("message %q: want both sizes", st.Message())
	}
	testenv.WantCode(t, errOf(block.CopySparse(ctx, src, src, block.CopyOptions{})), codes.InvalidArgument)
	testenv.WantCode(t, errOf(block.CopySparse(ctx, filepath.Join(dir, "missing"), src, block.CopyOptions{})), codes.NotFound)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	dst := garbage(t, t.TempDir(), 2<<20)
	testenv.WantCode(t, errOf(block.CopySparse(cctx, dst, src, block.CopyOptions{})), codes.Canceled)
}

func errOf(_ block.CopyResult, err error) error { return err }

// TestCopySparseSymlinkSwap: a source or destination replaced by a symlink
// is refused; the file it points to is neither read into the copy nor
// overwritten.
func TestCopySparseSymlinkSwap(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := sparseImage(t, dir, 1<<20, []island{{0, random(4096)}})
	victim := garbage(t, t.TempDir(), 1<<20)
	before := readAll(t, victim)
	link := filepath.Join(dir, "dst.img")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	testenv.WantCode(t, errOf(block.CopySparse(ctx, link, src, block.CopyOptions{})), codes.FailedPrecondition)
	if !bytes.Equal(readAll(t, victim), before) {
		t.Fatal("the symlink's target was written")
	}
	dst := garbage(t, t.TempDir(), 1<<20)
	testenv.WantCode(t, errOf(block.CopySparse(ctx, dst, link, block.CopyOptions{})), codes.FailedPrecondition)
}

// TestCopySparseFullDestination copies onto a file on a 1 MiB tmpfs: the
// copy fails with ResourceExhausted naming the destination, not success.
func TestCopySparseFullDestination(t *testing.T) {
	testenv.RequireRoot(t, "mounts a tmpfs")
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, "mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir)
	t.Cleanup(func() { testenv.Unmount(t, dir) })
	src := sparseImage(t, t.TempDir(), 8<<20, []island{{0, random(4 << 20)}})
	dst := sparseImage(t, dir, 8<<20, nil)
	_, err := block.CopySparse(context.Background(), dst, src, block.CopyOptions{})
	st := testenv.WantCode(t, err, codes.ResourceExhausted)
	if !strings.Contains(st.Message(), dst) || !strings.Contains(st.Message(), "no space left") {
		t.Fatalf("message %q: want the destination and ENOSPC named", st.Message())
	}
}

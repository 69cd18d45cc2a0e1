//go:build linux

package stats_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/csikit/csikit/internal/testenv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/stats"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func usage(t *testing.T, resp *csi.NodeGetVolumeStatsResponse, unit csi.VolumeUsage_Unit) *csi.VolumeUsage {
	t.Helper()
	for _, u := range resp.GetUsage() {
		if u.GetUnit() == unit {
			return u
		}
	}
	t.Fatalf("no %v usage in %v", unit, resp)
	return nil
}

// df reports size, used and available bytes and inodes of dir as df(1)
// computes them, an independent reading of the same statfs.
func df(t *testing.T, dir string) (bytes, inodes [3]int64) {
	t.Helper()
	parse := func(out string) (v [3]int64) {
		lines := strings.Split(out, "\n")
		f := strings.Fields(lines[len(lines)-1])
		for i := range v {
			n, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				t.Fatalf("df output %q: %v", out, err)
			}
			v[i] = n
		}
		return v
	}
	bytes = parse(testenv.Run(t, "df", "-B1", "--output=size,used,avail", dir))
	inodes = parse(testenv.Run(t, "df", "--output=itotal,iused,iavail", dir))
	return bytes, inodes
}

func TestVolumeStatsFilesystem(t *testing.T) {
	for _, tc := range []struct {
		fstype string
		size   int64
	}{
		{"ext4", 64 << 20},
		{"xfs", 320 << 20}, // mkfs.xfs refuses filesystems under 300 MiB
	} {
		t.Run(tc.fstype, func(t *testing.T) {
			dir, _ := testenv.MountFS(t, tc.fstype, tc.size, "")
			ctx := context.Background()
			resp, err := stats.VolumeStats(ctx, dir)
			if err != nil {
				t.Fatalf("VolumeStats(%s): got error %v, want nil", dir, err)
			}
			b := usage(t, resp, csi.VolumeUsage_BYTES)
			in := usage(t, resp, csi.VolumeUsage_INODES)
			if b.Total > tc.size || b.Total < tc.size*8/10 {
				t.Errorf("bytes total: got %d, want within 80%%..100%% of the %d-byte device", b.Total, tc.size)
			}
			if b.Used+b.Available > b.Total || b.Used <= 0 || b.Available <= 0 {
				t.Errorf("bytes: got used %d + available %d against total %d, want both > 0 and sum <= total", b.Used, b.Available, b.Total)
			}
			if in.Total <= 0 || in.Used <= 0 || in.Used+in.Available != in.Total {
				t.Errorf("inodes: got total %d used %d free %d, want used+free == total > 0", in.Total, in.Used, in.Available)
			}
			wantB, wantI := df(t, dir)
			if got := [3]int64{b.Total, b.Used, b.Available}; got != wantB {
				t.Errorf("bytes (total, used, available): got %v, want df's %v", got, wantB)
			}
			if got := [3]int64{in.Total, in.Used, in.Available}; got != wantI {
				t.Errorf("inodes (total, used, free): got %v, want df's %v", got, wantI)
			}

			// Writing 8 MiB must show up in used bytes and one more inode.
			const n = 8 << 20
			f, err := os.Create(filepath.Join(dir, "data"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(make([]byte, n)); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			after, err := stats.VolumeStats(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			b2 := usage(t, after, csi.VolumeUsage_BYTES)
			in2 := usage(t, after, csi.VolumeUsage_INODES)
			if d := b2.Used - b.Used; d < n || d > n+n/4 {
				t.Errorf("used bytes grew by %d after writing %d bytes, want %d..%d", d, n, n, n+n/4)
			}
			if d := b.Available - b2.Available; d < n {
				t.Errorf("available bytes shrank by %d after writing %d bytes, want >= %d", d, n, n)
			}
			if in2.Used != in.Used+1 {
				t.Errorf("used inodes: got %d, want %d", in2.Used, in.Used+1)
			}
		})
	}
}

func TestVolumeStatsBlock(t *testing.T) {
	const size = 48 << 20
	dev := testenv.LoopDevice(t, size)
	target := testenv.BindBlock(t, dev)
	for _, path := range []string{target, dev} {
		resp, err := stats.VolumeStats(context.Background(), path)
		if err != nil {
			t.Fatalf("VolumeStats(%s): got error %v, want nil", path, err)
		}
		if len(resp.GetUsage()) != 1 {
			t.Fatalf("VolumeStats(%s): got %d usage entries, want 1 (bytes only)", path, len(resp.GetUsage()))
		}
		u := resp.GetUsage()[0]
		if u.GetUnit() != csi.VolumeUsage_BYTES || u.GetTotal() != size || u.GetUsed() != 0 || u.GetAvailable() != 0 {
			t.Errorf("VolumeStats(%s): got %v, want BYTES total %d only", path, u, size)
		}
	}
}

func TestVolumeStatsErrors(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		path string
		cfg  stats.Config
		want codes.Code
	}{
		{"missing", context.Background(), filepath.Join(tmp, "nope"), stats.Config{}, codes.NotFound},
		{"missing parent is a file", context.Background(), filepath.Join(file, "x"), stats.Config{}, codes.NotFound},
		{"directory not a mount", context.Background(), tmp, stats.Config{}, codes.NotFound},
		{"directory allowed unmounted", context.Background(), tmp, stats.Config{AllowUnmounted: true}, codes.OK},
		{"regular file", context.Background(), file, stats.Config{AllowUnmounted: true}, codes.NotFound},
		{"empty", context.Background(), "", stats.Config{}, codes.InvalidArgument},
		{"relative", context.Background(), "var/lib/kubelet", stats.Config{}, codes.InvalidArgument},
		{"NUL byte", context.Background(), "/tmp/a\x00b", stats.Config{}, codes.InvalidArgument},
		{"too long", context.Background(), "/" + strings.Repeat("a", 5000), stats.Config{}, codes.InvalidArgument},
		{"canceled", canceled, "/", stats.Config{}, codes.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := tc.cfg.VolumeStats(tc.ctx, tc.path)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("VolumeStats(%q): got code %v (%v), want %v", tc.path, got, err, tc.want)
			}
			if err == nil && len(resp.GetUsage()) == 0 {
				t.Errorf("VolumeStats(%q): got no usage, want some", tc.path)
			}
			if err != nil && resp != nil {
				t.Errorf("VolumeStats(%q): got response %v with error, want nil", tc.path, resp)
			}
		})
	}
}

// The root of the mount namespace is a mount point: no loop device needed.
func TestVolumeStatsRoot(t *testing.T) {
	resp, err := stats.VolumeStats(context.Background(), "/")
	if err != nil {
		t.Fatalf("VolumeStats(/): got %v, want nil", err)
	}
	if b := usage(t, resp, csi.VolumeUsage_BYTES); b.Total <= 0 {
		t.Errorf("VolumeStats(/): got total %d, want > 0", b.Total)
	}
}

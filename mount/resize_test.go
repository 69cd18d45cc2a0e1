//go:build linux

package mount_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/mount"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

func TestResizeOnline(t *testing.T) {
	for _, tc := range []struct {
		fstype, tool, pkg string
		size              int64
	}{
		{"ext4", "resize2fs", "e2fsprogs", 64 << 20},
		{"xfs", "xfs_growfs", "xfsprogs", 320 << 20},
	} {
		t.Run(tc.fstype, func(t *testing.T) {
			requireTool(t, tc.tool, tc.pkg)
			requireTool(t, "mkfs."+tc.fstype, tc.pkg)
			if c, _ := mount.ResizeCapability(tc.fstype); !mount.CanResizeOnline(tc.fstype) {
				t.Skipf("needs %s: the kernel refuses to grow a mounted %s without it", c, tc.fstype)
			}
			dev, file := loopDevice(t, tc.size)
			ctx := context.Background()
			m := mount.New(mount.Options{})
			staging := filepath.Join(t.TempDir(), "staging")
			cleanupMounts(t, staging)
			if err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: staging, FSType: tc.fstype}); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(staging, "data"), "precious")
			opts := mount.ResizeOptions{Device: dev, Path: staging}
			if grew, err := m.Resize(ctx, opts); err != nil || grew {
				t.Fatalf("Resize at full size: got %t, %v, want false, nil", grew, err)
			}
			before := fsSize(t, staging)

			if err := os.Truncate(file, 2*tc.size); err != nil {
				t.Fatal(err)
			}
			if err := block.RefreshLoopSize(ctx, dev); err != nil {
				t.Fatal(err)
			}
			grew, err := m.Resize(ctx, opts)
			if err != nil || !grew {
				t.Fatalf("Resize after growing the device: got %t, %v, want true, nil", grew, err)
			}
			if after := fsSize(t, staging); after < before+tc.size*9/10 {
				t.Fatalf("file system size: got %d after, %d before, want about %d more", after, before, tc.size)
			}
			if grew, err := m.Resize(ctx, opts); err != nil || grew {
				t.Fatalf("Resize retry: got %t, %v, want false, nil", grew, err)
			}
			wantFile(t, filepath.Join(staging, "data"), "precious")
			if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestResizeErrors(t *testing.T) {
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	dev, _ := loopDevice(t, 32<<20)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	_, err := m.Resize(ctx, mount.ResizeOptions{Device: dev, Path: t.TempDir()})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = m.Resize(ctx, mount.ResizeOptions{Device: dev, Path: "relative"})
	wantCode(t, err, codes.InvalidArgument)
	_, err = m.Resize(ctx, mount.ResizeOptions{Device: "/dev/csikit-missing", Path: t.TempDir()})
	wantCode(t, err, codes.NotFound)
}

func fsSize(t *testing.T, p string) int64 {
	t.Helper()
	var sfs unix.Statfs_t
	if err := unix.Statfs(p, &sfs); err != nil {
		t.Fatal(err)
	}
	return int64(sfs.Blocks) * sfs.Bsize
}

// TestResizeExt4Scripted checks the ext4 command path on a real mounted
// ext4, with resize2fs scripted: it runs even where the kernel refuses the
// real online resize for lack of CAP_SYS_RESOURCE.
func TestResizeExt4Scripted(t *testing.T) {
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	dev, _ := loopDevice(t, 32<<20)
	ctx := context.Background()
	staging := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, staging)
	if err := mount.New(mount.Options{}).Stage(ctx, mount.StageOptions{Device: dev, Target: staging}); err != nil {
		t.Fatal(err)
	}
	var calls []string
	fail := false
	real := mount.ExecRunner()
	m := newMounter(mount.RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if name != "resize2fs" {
			return real.Run(ctx, name, args...)
		}
		calls = append(calls, name+" "+args[0])
		if fail {
			return []byte("resize2fs 1.47.0\nresize2fs: Permission denied to resize filesystem\n"), &mount.ExitError{Command: name, Code: 1}
		}
		return []byte("The filesystem is already 8192 (4k) blocks long.  Nothing to do!\n"), nil
	}))
	grew, err := m.Resize(ctx, mount.ResizeOptions{Device: dev, Path: staging})
	if err != nil || grew {
		t.Fatalf("Resize: got %t, %v, want false, nil (size unchanged)", grew, err)
	}
	if len(calls) != 1 || calls[0] != "resize2fs "+dev {
		t.Fatalf("calls: got %q, want [resize2fs %s]", calls, dev)
	}
	fail = true
	_, err = m.Resize(ctx, mount.ResizeOptions{Device: dev, Path: staging})
	wantCode(t, err, codes.Internal)
	if want := "Permission denied to resize filesystem"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q: want the tool's reason %q", err, want)
	}
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
}

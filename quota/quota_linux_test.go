//go:build linux

package quota_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/quota"
)

// loopFS makes a filesystem of fstype on a loop device and mounts it with
// opts ("prjquota" for project quotas); everything is undone at cleanup.
// ext4 is made with the project and quota features.
func loopFS(t *testing.T, fstype, opts string) string {
	t.Helper()
	testenv.RequireRoot(t, "mounts filesystems and sets quotas")
	pkg := map[string]string{"xfs": "xfsprogs", "ext4": "e2fsprogs"}[fstype]
	testenv.RequireCommand(t, "mkfs."+fstype, pkg)
	requireQuotaKernel(t, fstype, opts)
	tmp := t.TempDir()
	img, dir := filepath.Join(tmp, "fs.img"), filepath.Join(tmp, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 320<<20); err != nil { // xfs wants 300 MiB at least
		t.Fatal(err)
	}
	args := []string{"-q", img}
	if fstype == "ext4" {
		args = []string{"-q", "-F", "-O", "quota,project", "-I", "256", img}
	}
	if out, err := exec.Command("mkfs."+fstype, args...).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.%s: %v: %s", fstype, err, out)
	}
	ctx := context.Background()
	dev, err := block.AttachLoop(ctx, img, block.LoopOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { block.DetachLoop(context.Background(), dev) })
	if err := unix.Mount(dev, dir, fstype, 0, opts); err != nil {
		t.Fatalf("mount %s (%s, %q): %v", dev, fstype, opts, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// requireQuotaKernel skips when the kernel provably cannot mount fstype
// with quotas: xfs needs CONFIG_XFS_QUOTA; ext4 made with the quota
// feature needs CONFIG_QFMT_V2 even to mount.
func requireQuotaKernel(t *testing.T, fstype, opts string) {
	t.Helper()
	if fstype == "xfs" && opts == "" {
		return // mounts without quotas anywhere
	}
	if fstype == "xfs" {
		testenv.SkipWithoutKernelOption(t, "CONFIG_XFS_QUOTA", "xfs quotas")
	}
	testenv.SkipWithoutKernelOption(t, "CONFIG_QUOTA", "filesystem quotas")
	if fstype == "ext4" {
		testenv.SkipWithoutKernelOption(t, "CONFIG_QFMT_V2", "ext4's quota feature")
	}
}

func wantCode(t *testing.T, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("got %v (%v), want %v", got, err, want)
	}
}

// TestProjectQuota, on xfs and ext4 with project quotas on: a directory
// given a project and a limit refuses writes beyond the limit with ENOSPC,
// statfs on it reports the limit as its size, Get reports the usage, and
// raising the limit lets the writes through.
func TestProjectQuota(t *testing.T) {
	ctx := context.Background()
	for _, fstype := range []string{"xfs", "ext4"} {
		t.Run(fstype, func(t *testing.T) {
			root := loopFS(t, fstype, "prjquota")
			if err := quota.Check(ctx, root); err != nil {
				t.Fatalf("Check on %s with prjquota: %v", fstype, err)
			}
			dir := filepath.Join(root, "vol")
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			const id, limit = quota.ProjectID(4242), 4 << 20
			if err := quota.SetProject(ctx, dir, id); err != nil {
				t.Fatal(err)
			}
			if got, err := quota.Project(ctx, dir); err != nil || got != id {
				t.Fatalf("Project: got %d, %v, want %d", got, err, id)
			}
			if err := quota.SetLimit(ctx, root, id, limit); err != nil {
				t.Fatal(err)
			}
			var st unix.Statfs_t
			if err := unix.Statfs(dir, &st); err != nil {
				t.Fatal(err)
			}
			if got := int64(st.Blocks) * st.Bsize; got != limit {
				t.Errorf("statfs size of the directory: got %d, want the limit %d", got, limit)
			}

			// A subdirectory made later inherits the project.
			sub := filepath.Join(dir, "a", "b")
			if err := os.MkdirAll(sub, 0o777); err != nil {
				t.Fatal(err)
			}
			if got, _ := quota.Project(ctx, sub); got != id {
				t.Errorf("project of a new subdirectory: got %d, want %d", got, id)
			}
			n, err := fill(filepath.Join(sub, "big"), 2*limit)
			if !errors.Is(err, unix.ENOSPC) {
				t.Errorf("writing %d bytes into a %d-byte project: got %v after %d bytes, want ENOSPC", 2*limit, limit, err, n)
			}
			if n > limit {
				t.Errorf("wrote %d bytes into a project limited to %d", n, limit)
			}
			u, err := quota.Get(ctx, root, id)
			if err != nil {
				t.Fatal(err)
			}
			if u.LimitBytes != limit || u.Bytes < limit/2 || u.Bytes > limit || u.Inodes < 4 {
				t.Errorf("Get: %+v, want limit %d, bytes near it, 4+ inodes", u, limit)
			}

			// Raising the limit lets more in.
			if err := quota.SetLimit(ctx, root, id, 4*limit); err != nil {
				t.Fatal(err)
			}
			if n, err := fill(filepath.Join(dir, "more"), 2*limit); err != nil {
				t.Errorf("writing after raising the limit: %v after %d bytes", err, n)
			}
			if err := unix.Statfs(dir, &st); err != nil {
				t.Fatal(err)
			}
			if got := int64(st.Blocks) * st.Bsize; got != 4*limit {
				t.Errorf("statfs size after raising: got %d, want %d", got, 4*limit)
			}
			// Limit 0 removes it.
			if err := quota.SetLimit(ctx, root, id, 0); err != nil {
				t.Fatal(err)
			}
			if u, _ := quota.Get(ctx, root, id); u.LimitBytes != 0 {
				t.Errorf("limit after SetLimit 0: %d, want none", u.LimitBytes)
			}
		})
	}
}

// fill writes up to n bytes to a new file and syncs it, returning how many
// bytes were written and the first error.
func fill(path string, n int) (int, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := bytes.Repeat([]byte{0xa5}, 64<<10)
	done := 0
	for done < n {
		w, err := f.Write(buf[:min(len(buf), n-done)])
		done += w
		if err != nil {
			return done, err
		}
	}
	return done, f.Sync()
}

// TestCheckUnsupported: filesystems without enforced project quotas are
// named as such, with FailedPrecondition and ErrUnsupported.
func TestCheckUnsupported(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ fstype, opts string }{
		{"xfs", ""},              // quotas off
		{"xfs", "pqnoenforce"},   // accounted, not enforced
		{"ext4", ""},             // quota feature: accounted, not enforced without prjquota
		{"xfs", "uquota,gquota"}, // other quota types only
	} {
		t.Run(c.fstype+"/"+c.opts, func(t *testing.T) {
			root := loopFS(t, c.fstype, c.opts)
			err := quota.Check(ctx, root)
			wantCode(t, err, codes.FailedPrecondition)
			if !errors.Is(err, quota.ErrUnsupported) {
				t.Errorf("error %v does not unwrap to ErrUnsupported", err)
			}
		})
	}
	t.Run("tmpfs", func(t *testing.T) {
		testenv.RequireRoot(t, "mounts filesystems and sets quotas")
		dir := t.TempDir()
		if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
		err := quota.Check(ctx, dir)
		wantCode(t, err, codes.FailedPrecondition)
	})
}

// TestRefusals: symlinks at the final element, missing paths, project 0.
func TestRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	wantCode(t, quota.SetProject(ctx, link, 7), codes.InvalidArgument)
	wantCode(t, quota.SetProject(ctx, filepath.Join(dir, "missing"), 7), codes.NotFound)
	wantCode(t, quota.SetProject(ctx, "relative", 7), codes.InvalidArgument)
	wantCode(t, quota.SetLimit(ctx, dir, 0, 1<<20), codes.InvalidArgument)
	wantCode(t, quota.SetLimit(ctx, dir, 7, -1), codes.InvalidArgument)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	wantCode(t, quota.Check(cctx, dir), codes.Canceled)
}

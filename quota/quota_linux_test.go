//go:build linux

package quota_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/csitest/vmtest"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/quota"
)

func TestMain(m *testing.M) { os.Exit(vmtest.Main(m)) }

// quotaVM are the modules project quotas on xfs and ext4 need.
var quotaVM = vmtest.Options{Modules: []string{"loop", "xfs", "ext4", "quota_v2"}}

// inQuotaVM runs the calling test in a VM on Debian's kernel (vmtest)
// when this kernel was provably built without what project quotas on xfs
// and ext4 need; true means it ran there and the caller returns.
func inQuotaVM(t *testing.T) bool {
	t.Helper()
	for _, o := range []string{"CONFIG_QUOTA", "CONFIG_XFS_QUOTA", "CONFIG_QFMT_V2"} {
		if v, ok := testenv.KernelOption(o); ok && v == "" {
			return vmtest.Delegate(t, quotaVM)
		}
	}
	return false
}

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
	for _, p := range []string{filepath.Dir(tmp), tmp} { // fill writes as nobody
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
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

// TestProjectQuota, on xfs and ext4 with project quotas on: a directory
// given a project and a limit refuses writes beyond the limit with ENOSPC,
// statfs on it reports the limit as its size, Get reports the usage, and
// raising the limit lets the writes through.
func TestProjectQuota(t *testing.T) {
	if inQuotaVM(t) {
		return
	}
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
			if err := os.Chmod(dir, 0o777); err != nil { // fill writes as nobody
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
			for _, p := range []string{filepath.Dir(sub), sub} {
				if err := os.Chmod(p, 0o777); err != nil {
					t.Fatal(err)
				}
			}
			if got, _ := quota.Project(ctx, sub); got != id {
				t.Errorf("project of a new subdirectory: got %d, want %d", got, id)
			}
			n, err := fill(filepath.Join(sub, "big"), 2*limit)
			if !errors.Is(err, unix.ENOSPC) && !errors.Is(err, unix.EDQUOT) {
				t.Errorf("writing %d bytes into a %d-byte project: got %v after %d bytes, want ENOSPC (xfs) or EDQUOT (ext4)", 2*limit, limit, err, n)
			}
			t.Logf("%s: an unprivileged write beyond the limit fails with %v", fstype, err)
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

// fill writes n bytes to a new file as an unprivileged user (uid and gid
// 65534, no capabilities: quota limits bind root too on xfs, but ext4 lets
// CAP_SYS_RESOURCE pass them, so only an unprivileged writer — a pod's —
// proves a limit), syncing at the end. It returns the file's size and the
// error dd met: ENOSPC or EDQUOT when it names one.
func fill(path string, n int) (int, error) {
	cmd := exec.Command("dd", "if=/dev/zero", "of="+path, "bs=65536", fmt.Sprintf("count=%d", n/65536), "conv=fsync", "status=none")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	size := 0
	if st, serr := os.Stat(path); serr == nil {
		size = int(st.Size())
	}
	if err == nil {
		return size, nil
	}
	msg := strings.ToLower(string(out))
	for _, e := range []unix.Errno{unix.ENOSPC, unix.EDQUOT} {
		if strings.Contains(msg, strings.ToLower(e.Error())) {
			return size, e
		}
	}
	return size, fmt.Errorf("dd: %v: %s", err, out)
}

// TestCheckUnsupported: filesystems without enforced project quotas are
// named as such, with FailedPrecondition and ErrUnsupported.
func TestCheckUnsupported(t *testing.T) {
	if inQuotaVM(t) {
		return
	}
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
			testenv.WantCode(t, err, codes.FailedPrecondition)
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
		testenv.WantCode(t, err, codes.FailedPrecondition)
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
	testenv.WantCode(t, quota.SetProject(ctx, link, 7), codes.InvalidArgument)
	testenv.WantCode(t, quota.SetProject(ctx, filepath.Join(dir, "missing"), 7), codes.NotFound)
	testenv.WantCode(t, quota.SetProject(ctx, "relative", 7), codes.InvalidArgument)
	testenv.WantCode(t, quota.SetLimit(ctx, dir, 0, 1<<20), codes.InvalidArgument)
	testenv.WantCode(t, quota.SetLimit(ctx, dir, 7, -1), codes.InvalidArgument)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	testenv.WantCode(t, quota.Check(cctx, dir), codes.Canceled)
}

// helperEnv makes TestSetProjectHelper set a project: "<path> <id>".
const helperEnv = "QUOTA_TEST_SET_PROJECT"

// TestSetProjectHelper runs only as the child of TestTenantCanMoveFiles:
// it sets the project of the file named by $QUOTA_TEST_SET_PROJECT and
// prints the errno it met ("0" for none).
func TestSetProjectHelper(t *testing.T) {
	arg := os.Getenv(helperEnv)
	if arg == "" {
		t.Skip("runs only as the child of TestTenantCanMoveFiles")
	}
	var path string
	var id quota.ProjectID
	if _, err := fmt.Sscan(arg, &path, &id); err != nil {
		t.Fatal(err)
	}
	var errno unix.Errno
	errors.As(quota.SetProject(context.Background(), path, id), &errno)
	fmt.Printf("errno=%d\n", int(errno))
}

// TestTenantCanMoveFiles shows, on the kernel the tests run on, what the
// package doc warns of: a file's project ID — what a project quota counts —
// can be changed by the file's owner without any capability (a non-root
// pod moves its own files to project 0, out of every limit), not by
// another unprivileged user, and by nobody inside a user namespace (EINVAL
// even for its root, who owns the file there).
func TestTenantCanMoveFiles(t *testing.T) {
	dir := loopFS(t, "xfs", "") // project IDs are stored without quotas on
	ctx := context.Background()
	own, other := filepath.Join(dir, "own"), filepath.Join(dir, "other")
	for _, p := range []string{own, other} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := quota.SetProject(ctx, p, 7); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(own, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// As uid 65534 without capabilities: setfsuid from 0 drops CAP_FOWNER
	// from this thread's effective set; the thread is not reused after.
	done := make(chan [2]error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		unix.Setfsgid(65534)
		unix.Setfsuid(65534)
		done <- [2]error{quota.SetProject(ctx, own, 0), quota.SetProject(ctx, other, 0)}
	}()
	errs := <-done
	if errs[0] != nil {
		t.Errorf("the owner (uid 65534, no capabilities) moving its file to project 0: %v, want success (what the doc warns of)", errs[0])
	}
	if !errors.Is(errs[1], unix.EPERM) {
		t.Errorf("another user moving root's file to project 0: %v, want EPERM", errs[1])
	}
	for p, want := range map[string]quota.ProjectID{own: 0, other: 7} {
		if got, err := quota.Project(ctx, p); err != nil || got != want {
			t.Errorf("project of %s: %d, %v; want %d", filepath.Base(p), got, err, want)
		}
	}
	// Root of a user namespace (mapped to root, so it owns the file and
	// holds CAP_FOWNER there) cannot change it.
	t.Run("user_namespace", func(t *testing.T) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSetProjectHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+other+" 0")
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		}
		out, err := cmd.CombinedOutput()
		if errors.Is(err, syscall.EPERM) && cmd.Process == nil {
			// The kernel refuses CLONE_NEWUSER in a chroot and where user
			// namespaces are off.
			testenv.Skipf(t, "cannot create a user namespace here: %v", err)
		}
		if err != nil {
			t.Fatalf("helper in a user namespace: %v\n%s", err, out)
		}
		if want := fmt.Sprintf("errno=%d", int(unix.EINVAL)); !strings.Contains(string(out), want) {
			t.Errorf("root of a user namespace moving its file to project 0: got %q, want %s (EINVAL)", out, want)
		}
		if got, _ := quota.Project(ctx, other); got != 7 {
			t.Errorf("project after the user namespace's attempt: %d, want 7", got)
		}
	})
}

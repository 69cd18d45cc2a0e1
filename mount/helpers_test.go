//go:build linux

package mount_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/csikit/csikit/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/mount"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(t, "needs root: mounts file systems")
	}
}

func requireTool(t testing.TB, name, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		testenv.Skipf(t, "needs %s (Debian package %s)", name, pkg)
	}
}

func wantCode(t testing.TB, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Fatalf("got code %v (err %v), want %v", got, err, want)
	}
}

// loopDevice attaches a loop device to a fresh sparse file of size bytes and
// detaches it when the test ends.
func loopDevice(t testing.TB, size int64) (dev, file string) {
	t.Helper()
	requireRoot(t)
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		testenv.Skipf(t, "needs loop devices: %v", err)
	}
	file = filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
	return attachLoop(t, file), file
}

// attachLoop attaches a loop device to file and detaches it when the test
// ends.
func attachLoop(t testing.TB, file string) string {
	t.Helper()
	dev, err := block.AttachLoop(context.Background(), file, block.LoopOptions{})
	if err != nil {
		t.Fatalf("AttachLoop: %v", err)
	}
	t.Cleanup(func() {
		if err := block.DetachLoop(context.Background(), dev); err != nil {
			t.Errorf("DetachLoop(%s): %v", dev, err)
		}
	})
	return dev
}

// cleanupMounts unmounts anything left on the paths when the test ends,
// also after a failure. Register it before mounting: cleanups run last in,
// first out, so the unmount precedes the loop detach registered earlier.
func cleanupMounts(t testing.TB, paths ...string) {
	t.Cleanup(func() {
		for _, p := range paths {
			for i := 0; i < 16 && mounted(p); i++ {
				if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
					t.Errorf("cleanup unmount %s: %v", p, err)
					break
				}
			}
		}
	})
}

// mounted is an independent check (statx or /proc/self/mountinfo), not the
// package's own code.
func mounted(p string) bool {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, p, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE, &stx)
	if errors.Is(err, unix.ENOENT) {
		return false
	}
	if err == nil && stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
	}
	data, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == p {
			return true
		}
	}
	return false
}

func writeFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func wantFile(t testing.TB, p, want string) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v, want %q", p, err, want)
	}
	if string(got) != want {
		t.Fatalf("%s: got %q, want %q", p, got, want)
	}
}

// deadFUSE mounts a FUSE file system at dir whose server is gone: the
// /dev/fuse descriptor is closed right after mounting, exactly what the
// kernel sees when a FUSE daemon is killed. Every access then fails with
// ENOTCONN.
func deadFUSE(t testing.TB, dir string) {
	t.Helper()
	requireRoot(t)
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		testenv.Skipf(t, "needs /dev/fuse: %v", err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	err = unix.Mount("csikit-test", dir, "fuse.csikit-test", unix.MS_NOSUID|unix.MS_NODEV, opts)
	unix.Close(fd)
	if err != nil {
		t.Fatalf("mount fuse at %s: %v", dir, err)
	}
	cleanupMounts(t, dir)
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); !errors.Is(err, unix.ENOTCONN) {
		t.Fatalf("stat of dead FUSE mount %s: got %v, want ENOTCONN", dir, err)
	}
}

// script is a scripted Runner: it records calls and answers from a table
// keyed by program name.
type script struct {
	mu    sync.Mutex
	calls []string
	reply map[string]func(args []string) ([]byte, error)
}

func (s *script) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	s.mu.Lock()
	s.calls = append(s.calls, strings.Join(append([]string{name}, args...), " "))
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f := s.reply[name]; f != nil {
		return f(args)
	}
	return nil, fmt.Errorf("script: unexpected command %s", name)
}

func (s *script) called(prefix string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

func newMounter(r mount.Runner) *mount.Mounter { return mount.New(mount.Options{Runner: r}) }

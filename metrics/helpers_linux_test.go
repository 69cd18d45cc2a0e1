//go:build linux

package metrics_test

import (
	"github.com/csikit/csikit/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needRoot skips tests that attach loop devices or mount.
func needRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(tb, "needs root: attaches loop devices and mounts filesystems")
	}
}

// needTool skips when a command the test runs is not installed.
func needTool(tb testing.TB, name, pkg string) {
	tb.Helper()
	if _, err := exec.LookPath(name); err != nil {
		testenv.Skipf(tb, "needs %s (Debian package %s)", name, pkg)
	}
}

func run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// loopDevice attaches a sparse file of size bytes to a free loop device and
// detaches it when the test ends.
func loopDevice(tb testing.TB, size int64) string {
	tb.Helper()
	needRoot(tb)
	needTool(tb, "losetup", "mount")
	img := filepath.Join(tb.TempDir(), "disk.img")
	f, err := os.Create(img)
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		tb.Fatal(err)
	}
	f.Close()
	dev := run(tb, "losetup", "--find", "--show", img)
	tb.Cleanup(func() { detach(tb, dev) })
	return dev
}

// detach detaches dev; it is fine if it was already detached.
func detach(tb testing.TB, dev string) {
	out, err := exec.Command("losetup", "-d", dev).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No such device") {
		tb.Errorf("losetup -d %s: %v: %s", dev, err, out)
	}
}

// mountFS makes a filesystem of fstype on a new loop device of size bytes
// and mounts it with opts on a fresh directory, undone when the test ends.
func mountFS(tb testing.TB, fstype string, size int64, opts string) (dir, dev string) {
	tb.Helper()
	needRoot(tb)
	pkg := map[string]string{"ext4": "e2fsprogs", "xfs": "xfsprogs"}[fstype]
	needTool(tb, "mkfs."+fstype, pkg)
	dev = loopDevice(tb, size)
	run(tb, "mkfs."+fstype, "-q", dev)
	dir = filepath.Join(tb.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	args := []string{"-t", fstype}
	if opts != "" {
		args = append(args, "-o", opts)
	}
	run(tb, "mount", append(args, dev, dir)...)
	tb.Cleanup(func() { unmount(tb, dir) })
	return dir, dev
}

// bindBlock publishes dev the way a raw block volume is published: a
// regular file with the device node bind-mounted on it.
func bindBlock(tb testing.TB, dev string) string {
	tb.Helper()
	target := filepath.Join(tb.TempDir(), "block-target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		tb.Fatal(err)
	}
	run(tb, "mount", "--bind", dev, target)
	tb.Cleanup(func() { unmount(tb, target) })
	return target
}

func unmount(tb testing.TB, path string) {
	if out, err := exec.Command("umount", path).CombinedOutput(); err != nil {
		tb.Errorf("umount %s: %v: %s", path, err, out)
	}
}

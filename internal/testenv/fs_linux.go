//go:build linux

package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Run runs a command and fails tb with its output if it fails; it returns
// the trimmed output.
func Run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// LoopDevice attaches a sparse file of size bytes to a free loop device and
// detaches it when the test ends.
func LoopDevice(tb testing.TB, size int64) string {
	tb.Helper()
	RequireRoot(tb, "attaches loop devices and mounts filesystems")
	RequireCommand(tb, "losetup", "mount")
	img := filepath.Join(tb.TempDir(), "disk.img")
	f, err := os.Create(img)
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		tb.Fatal(err)
	}
	f.Close()
	dev := Run(tb, "losetup", "--find", "--show", img)
	tb.Cleanup(func() { Detach(tb, dev) })
	return dev
}

// Detach detaches dev; it is fine if it was already detached.
func Detach(tb testing.TB, dev string) {
	out, err := exec.Command("losetup", "-d", dev).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No such device") {
		tb.Errorf("losetup -d %s: %v: %s", dev, err, out)
	}
}

// MountFS makes a filesystem of fstype on a new loop device of size bytes
// and mounts it with opts on a fresh directory, undone when the test ends.
func MountFS(tb testing.TB, fstype string, size int64, opts string) (dir, dev string) {
	tb.Helper()
	RequireRoot(tb, "attaches loop devices and mounts filesystems")
	pkg := map[string]string{"ext4": "e2fsprogs", "xfs": "xfsprogs"}[fstype]
	RequireCommand(tb, "mkfs."+fstype, pkg)
	dev = LoopDevice(tb, size)
	Run(tb, "mkfs."+fstype, "-q", dev)
	dir = filepath.Join(tb.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	args := []string{"-t", fstype}
	if opts != "" {
		args = append(args, "-o", opts)
	}
	Run(tb, "mount", append(args, dev, dir)...)
	tb.Cleanup(func() { Unmount(tb, dir) })
	return dir, dev
}

// BindBlock publishes dev the way a raw block volume is published: a
// regular file with the device node bind-mounted on it.
func BindBlock(tb testing.TB, dev string) string {
	tb.Helper()
	target := filepath.Join(tb.TempDir(), "block-target")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		tb.Fatal(err)
	}
	Run(tb, "mount", "--bind", dev, target)
	tb.Cleanup(func() { Unmount(tb, target) })
	return target
}

// Unmount unmounts path, failing tb (not fatally) if it cannot.
func Unmount(tb testing.TB, path string) {
	if out, err := exec.Command("umount", path).CombinedOutput(); err != nil {
		tb.Errorf("umount %s: %v: %s", path, err, out)
	}
}

// BreakWrites makes every later write to the open file at path fail, as a
// dying disk would: the process's descriptor for it is replaced by a
// read-only one (writes then fail with EBADF).
func BreakWrites(t testing.TB, path string) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == path {
			fd, _ := strconv.Atoi(e.Name())
			if fd == int(ro.Fd()) {
				continue
			}
			if err := unix.Dup3(int(ro.Fd()), fd, unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no open descriptor for %s", path)
}

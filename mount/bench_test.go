//go:build linux

package mount_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/csikit/csikit/mount"
	"golang.org/x/sys/unix"
	mountutils "k8s.io/mount-utils"
)

// nsEnv marks the child process that runs a benchmark inside a mount
// namespace of its own, so thousands of test mounts stay invisible to the
// rest of the machine and vanish with the process.
const nsEnv = "CSIKIT_BENCH_PRIVATE_MOUNTNS"

// inPrivateNamespace re-runs the named benchmark in a child process with a
// private mount namespace and copies its result lines to stdout. It returns
// true in the child, where the benchmark should run.
func inPrivateNamespace(b *testing.B, name string) bool {
	if os.Getenv(nsEnv) != "" {
		return true
	}
	args := []string{"-test.run=^$", "-test.bench=^" + name + "$", "-test.benchmem"}
	for _, f := range []string{"test.benchtime", "test.count", "test.cpu", "test.v"} {
		if fl := flag.Lookup(f); fl != nil && fl.Value.String() != "" {
			args = append(args, "-"+f+"="+fl.Value.String())
		}
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), nsEnv+"=1")
	// Go makes / recursively private in the new namespace before exec.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "Benchmark") || strings.Contains(line, "FAIL") || strings.Contains(line, "_test.go") {
			fmt.Println(line)
		}
	}
	if err != nil {
		b.Fatalf("benchmark child in a private mount namespace: %v\n%s", err, out)
	}
	b.Skip("figures above were measured in a child process with a private mount namespace")
	return false
}

// BenchmarkMountTable measures one mount-point check with 100, 1,000 and
// 5,000 mounts on the machine: the package's IsMountPoint against
// mount-utils' IsLikelyNotMountPoint, IsMountPoint and List. The metric
// "correct" is 1 when the answer was right (the probed path is a bind mount
// within one file system, which a device-number comparison with the parent
// misses; mount-utils v0.37 uses statx there too).
func BenchmarkMountTable(b *testing.B) {
	requireRoot(b)
	if !inPrivateNamespace(b, "BenchmarkMountTable") {
		return
	}
	root := b.TempDir()
	if err := unix.Mount("csikit-bench", root, "tmpfs", 0, "size=16m"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = unix.Unmount(root, unix.MNT_DETACH) }) // takes every mount below along
	src := filepath.Join(root, "src")
	if err := os.Mkdir(src, 0o750); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	m := mount.New(mount.Options{})
	mu := mountutils.New("")
	var targets []string
	for _, n := range []int{100, 1000, 5000} {
		for len(targets) < n {
			t := filepath.Join(root, fmt.Sprint("m", len(targets)))
			if err := os.Mkdir(t, 0o750); err != nil {
				b.Fatal(err)
			}
			if err := unix.Mount(src, t, "", unix.MS_BIND, ""); err != nil {
				b.Fatal(err)
			}
			targets = append(targets, t)
		}
		probe := targets[n/2]
		run := func(name string, check func() bool) {
			b.Run(fmt.Sprintf("mounts=%d/%s", n, name), func(b *testing.B) {
				ok := true
				for b.Loop() {
					ok = check()
				}
				b.ReportMetric(map[bool]float64{true: 1, false: 0}[ok], "correct")
			})
		}
		run("csikit.IsMountPoint", func() bool {
			mp, err := m.IsMountPoint(ctx, probe)
			return err == nil && mp
		})
		run("mountutils.IsLikelyNotMountPoint", func() bool {
			notMnt, err := mu.IsLikelyNotMountPoint(probe)
			return err == nil && !notMnt
		})
		run("mountutils.IsMountPoint", func() bool {
			mp, err := mu.IsMountPoint(probe)
			return err == nil && mp
		})
		run("mountutils.List", func() bool {
			mps, err := mu.List()
			if err != nil {
				return false
			}
			for _, p := range mps {
				if p.Path == probe {
					return true
				}
			}
			return false
		})
	}
}

// BenchmarkBindUnmount compares one bind mount plus unmount through the
// package (mount syscalls) with mount-utils' Mount/Unmount (mount(8) and
// umount(8)).
func BenchmarkBindUnmount(b *testing.B) {
	requireRoot(b)
	ctx := context.Background()
	src := b.TempDir()
	dir := b.TempDir()
	target := filepath.Join(dir, "vol")
	cleanupMounts(b, target)
	b.Run("floor/mkdir+rmdir", func(b *testing.B) { // what creating and removing the target costs on this disk
		for b.Loop() {
			if err := os.Mkdir(target, 0o750); err != nil {
				b.Fatal(err)
			}
			if err := os.Remove(target); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("floor/mount+umount", func(b *testing.B) { // mount(2)+umount2(2) alone
		if err := os.MkdirAll(target, 0o750); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
				b.Fatal(err)
			}
			if err := unix.Unmount(target, 0); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.Remove(target); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("csikit.Publish+Unpublish", func(b *testing.B) {
		m := mount.New(mount.Options{})
		for b.Loop() {
			if err := m.Publish(ctx, mount.PublishOptions{Source: src, Target: target, AllowUnmountedSource: true}); err != nil {
				b.Fatal(err)
			}
			if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("csikit.Publish+Unpublish/readonly", func(b *testing.B) {
		m := mount.New(mount.Options{})
		for b.Loop() {
			if err := m.Publish(ctx, mount.PublishOptions{Source: src, Target: target, ReadOnly: true, AllowUnmountedSource: true}); err != nil {
				b.Fatal(err)
			}
			if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mountutils.Mount+Unmount", func(b *testing.B) {
		if _, err := exec.LookPath("mount"); err != nil {
			b.Skip("needs mount(8)")
		}
		mu := mountutils.New("")
		if err := os.MkdirAll(target, 0o750); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := mu.Mount(src, target, "", []string{"bind"}); err != nil {
				b.Fatal(err)
			}
			if err := mu.Unmount(target); err != nil {
				b.Fatal(err)
			}
		}
	})
}

package kube

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TestUnmountBelow mounts nested tmpfs and a bind mount (with a space in
// its path, escaped in mountinfo) below a directory, and checks that
// unmountBelow lists them deepest first and removes every one, leaving
// the mount of a sibling directory alone.
func TestUnmountBelow(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CSIKIT_STRICT_TESTS") == "1" {
			t.Fatal("needs root (CSIKIT_STRICT_TESTS=1)")
		}
		t.Skip("needs root to mount")
	}
	base := t.TempDir()
	dir, sibling := filepath.Join(base, "env"), filepath.Join(base, "env-sibling")
	a, ab, c := filepath.Join(dir, "a"), filepath.Join(dir, "a", "b"), filepath.Join(dir, "c d")
	for _, d := range []string{a, c, sibling} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mount := func(src, dst, fstype string, flags uintptr) {
		t.Helper()
		if err := syscall.Mount(src, dst, fstype, flags, ""); err != nil {
			t.Fatalf("mount %s: %v", dst, err)
		}
		t.Cleanup(func() { _ = syscall.Unmount(dst, syscall.MNT_DETACH) })
	}
	mount("tmpfs", a, "tmpfs", 0)
	if err := os.Mkdir(ab, 0o755); err != nil {
		t.Fatal(err)
	}
	mount("tmpfs", ab, "tmpfs", 0)
	mount(a, c, "", syscall.MS_BIND)
	mount("tmpfs", sibling, "tmpfs", 0)

	got, err := mountsBelow(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != ab || !slices.Contains(got, a) || !slices.Contains(got, c) {
		t.Fatalf("mountsBelow(%s) = %q, want %s first, then %s and %s", dir, got, ab, a, c)
	}
	if errs := unmountBelow(dir); len(errs) > 0 {
		t.Fatal(errs)
	}
	if left, _ := mountsBelow(dir); len(left) > 0 {
		t.Fatalf("still mounted: %v", left)
	}
	if left, _ := mountsBelow(sibling); len(left) != 1 {
		t.Fatalf("the sibling %s (a prefix match, not below) was unmounted: %v", sibling, left)
	}
}

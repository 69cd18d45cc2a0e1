//go:build linux

package fstree

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/internal/testenv"
)

// TestWalkRefusesMountsItself checks the walk's own mount check, without
// the scan for mounts below that Remove makes first (a mount made after
// that scan). Both a
// directory mount and a file bind mount must stop it, their contents
// intact.
func TestWalkRefusesMountsItself(t *testing.T) {
	testenv.RequireRoot(t, "mounts tmpfs")
	for _, fallback := range []bool{false, true} {
		d := t.TempDir()
		mnt := filepath.Join(d, "vol/sub/mnt")
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
		if err := os.WriteFile(filepath.Join(mnt, "pod-data"), []byte("precious"), 0o644); err != nil {
			t.Fatal(err)
		}
		fd, err := openRoot(filepath.Join(d, "vol"))
		if err != nil {
			t.Fatal(err)
		}
		w := newWalker(context.Background())
		w.noOpenat2 = fallback
		err = w.removeContents(fd, filepath.Join(d, "vol"))
		unix.Close(fd)
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("fallback=%t: removeContents: got %v, want FailedPrecondition", fallback, err)
		}
		if b, err := os.ReadFile(filepath.Join(mnt, "pod-data")); err != nil || string(b) != "precious" {
			t.Fatalf("fallback=%t: mount contents after the refusal: %q, %v", fallback, b, err)
		}

		// A file bind-mounted onto a file of the tree.
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Fatal(err)
		}
		host := filepath.Join(d, "host-file")
		if err := os.WriteFile(host, []byte("host"), 0o644); err != nil {
			t.Fatal(err)
		}
		bound := filepath.Join(d, "vol2/f")
		if err := os.MkdirAll(filepath.Dir(bound), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bound, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(host, bound, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Unmount(bound, unix.MNT_DETACH) })
		fd, err = openRoot(filepath.Join(d, "vol2"))
		if err != nil {
			t.Fatal(err)
		}
		err = w.removeContents(fd, filepath.Join(d, "vol2"))
		unix.Close(fd)
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("fallback=%t: removeContents with a file mount: got %v, want FailedPrecondition", fallback, err)
		}
		if b, err := os.ReadFile(host); err != nil || string(b) != "host" {
			t.Fatalf("host file: %q, %v", b, err)
		}
	}
}

// TestMountsBelowEscapedPaths lists mounts below a directory whose path
// has a space, a tab, a newline and a backslash — escaped in mountinfo —
// and none from a sibling that shares its prefix.
func TestMountsBelowEscapedPaths(t *testing.T) {
	testenv.RequireRoot(t, "mounts tmpfs")
	d := filepath.Join(t.TempDir(), "vol with space\tand\\back\nslash")
	for _, p := range []string{"a/mnt one", "b", "../vol with space\tand\\back\nslash-sibling/mnt"} {
		mnt := filepath.Join(d, p)
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	}
	got, err := mountsBelow(d)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{filepath.Join(d, "a/mnt one"): true, filepath.Join(d, "b"): true}
	if len(got) != len(want) {
		t.Fatalf("mountsBelow(%q) = %q, want %v", d, got, want)
	}
	for _, g := range got {
		if !want[g] {
			t.Fatalf("mountsBelow(%q) = %q, want %v", d, got, want)
		}
	}
}

// BenchmarkMountsBelow is the mountinfo look-up Remove and Copy make,
// before they touch anything, on kernels without STATX_ATTR_MOUNT_ROOT
// (before 5.8); newer ones scan the tree instead (scanMounts).
func BenchmarkMountsBelow(b *testing.B) {
	d := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := mountsBelow(d); err != nil {
			b.Fatal(err)
		}
	}
}

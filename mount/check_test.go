//go:build linux

package mount_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/csikit/csikit/mount"
	"golang.org/x/sys/unix"
)

// TestMountPointMethods checks each way of telling a mount point (statx,
// openat2, mountinfo) on the hard case: a bind mount within one file
// system, at a path that mountinfo has to escape.
func TestMountPointMethods(t *testing.T) {
	requireRoot(t)
	root := t.TempDir()
	src := filepath.Join(root, "src")
	bind := filepath.Join(root, "a b\\c\td")
	plain := filepath.Join(root, "plain")
	for _, d := range []string{src, bind, plain} {
		if err := os.Mkdir(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(bind, link); err != nil {
		t.Fatal(err)
	}
	cleanupMounts(t, bind)
	if err := unix.Mount(src, bind, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	sure := func(f func(string) (bool, bool, error)) func(string) (bool, error) {
		return func(p string) (bool, error) {
			mnt, sure, err := f(p)
			if err == nil && !sure {
				t.Skip("this kernel cannot answer with this method")
			}
			return mnt, err
		}
	}
	m := mount.New(mount.Options{})
	for name, check := range map[string]func(string) (bool, error){
		"IsMountPoint": func(p string) (bool, error) { return m.IsMountPoint(context.Background(), p) },
		"statx":        sure(mount.MountRootStatx),
		"openat2":      sure(mount.NoXdevOpenat2),
		"mountinfo":    mount.InMountInfo,
	} {
		t.Run(name, func(t *testing.T) {
			for p, want := range map[string]bool{"/": true, bind: true, src: false, plain: false, root: false, link: false} {
				if got, err := check(p); err != nil || got != want {
					t.Errorf("%q: got %t, %v, want %t", p, got, err, want)
				}
			}
		})
	}
}

func TestIsMountPointMissing(t *testing.T) {
	_, err := mount.New(mount.Options{}).IsMountPoint(context.Background(), filepath.Join(t.TempDir(), "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v, want an error matching fs.ErrNotExist", err)
	}
}

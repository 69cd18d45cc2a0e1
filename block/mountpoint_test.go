//go:build linux

package block_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/csikit/csikit/block"
	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/internal/testenv"
)

// TestMountPointMethods checks each way of telling a mount point on a
// device node bound onto a file, at a path mountinfo has to escape.
func TestMountPointMethods(t *testing.T) {
	testenv.RequireLoopDevices(t)
	dev, _ := attach(t, 16<<20, block.LoopOptions{})
	root := t.TempDir()
	target := filepath.Join(root, "a b\\c")
	plain := filepath.Join(root, "plain")
	for _, f := range []string{target, plain} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	unmountAtCleanup(t, target)
	if err := unix.Mount(dev, target, "", unix.MS_BIND, ""); err != nil {
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
	for name, check := range map[string]func(string) (bool, error){
		"statx":     sure(block.MountRootStatx),
		"openat2":   sure(block.NoXdevOpenat2),
		"mountinfo": block.InMountInfo,
	} {
		t.Run(name, func(t *testing.T) {
			for p, want := range map[string]bool{target: true, plain: false, root: false} {
				if got, err := check(p); err != nil || got != want {
					t.Errorf("%q: got %t, %v, want %t", p, got, err, want)
				}
			}
		})
	}
}

package mountpoint_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/internal/mountpoint"
	"github.com/csikit/csikit/internal/testenv"
)

func TestUnescapeOctal(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/t\011x\134`: "/t\tx\\", `/short\04`: `/short\04`} {
		if got := mountpoint.UnescapeOctal(in); got != want {
			t.Errorf("UnescapeOctal(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestUnder: mounts at and below a directory, deepest first and the top
// of a stack first, with their file system types from List; a sibling
// whose name merely starts with the directory's is not below it.
func TestUnder(t *testing.T) {
	testenv.RequireRoot(t, "mounts tmpfs")
	d := t.TempDir()
	dir, deep, sibling := filepath.Join(d, "v"), filepath.Join(d, "v", "a b", "c"), filepath.Join(d, "vv")
	mnt := func(p string) {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = unix.Unmount(p, unix.MNT_DETACH) })
	}
	mnt(dir)
	mnt(dir) // stacked
	mnt(deep)
	mnt(sibling)
	got, err := mountpoint.Under(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{deep, dir, dir}; !slices.Equal(got, want) {
		t.Fatalf("Under(%s) = %q, want %q", dir, got, want)
	}
	all, err := mountpoint.List()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range all {
		if e.Point == deep {
			n++
			if e.FSType != "tmpfs" {
				t.Errorf("List: %s has type %q, want tmpfs", deep, e.FSType)
			}
		}
	}
	if n != 1 {
		t.Errorf("List has %d entries for %s, want 1", n, deep)
	}
}

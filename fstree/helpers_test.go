//go:build linux

package fstree_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/internal/testenv"
)

// tmpfs mounts a tmpfs of the given size ("4m") on a fresh directory and
// unmounts it when the test ends, also after a failure.
func tmpfs(t testing.TB, dir, size string) string {
	t.Helper()
	testenv.RequireRoot(t, "mounts tmpfs")
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "tmpfs")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size); err != nil {
		t.Fatalf("mount tmpfs at %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func write(t testing.TB, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is umasked
		t.Fatal(err)
	}
}

func wantContent(t testing.TB, p, want string) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v, want %q", p, err, want)
	}
	if string(got) != want {
		t.Fatalf("%s: got %q, want %q", p, got, want)
	}
}

func wantMissing(t testing.TB, p string) {
	t.Helper()
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("lstat %s: got %v, want it gone", p, err)
	}
}

// entry is what the tree comparison looks at for one path.
type entry struct {
	mode     os.FileMode
	uid, gid uint32
	mtime    int64
	size     int64
	rdev     uint64
	content  string // regular files
	linkDest string // symlinks
}

// snapshot describes a tree without following symlinks (filepath.WalkDir
// uses lstat), independently of the package's own code.
func snapshot(t testing.TB, root string) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{mode: fi.Mode(), uid: st.Uid, gid: st.Gid, size: st.Size, rdev: st.Rdev}
		if !fi.IsDir() {
			e.mtime = st.Mtim.Nano()
		}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e.content = string(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			e.linkDest, err = os.Readlink(p)
			if err != nil {
				return err
			}
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return out
}

// containsSecret reports whether any regular file below root holds secret.
func containsSecret(t testing.TB, root string, secret []byte) string {
	t.Helper()
	found := ""
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, secret) {
			found = p
		}
		return nil
	})
	return found
}

func mustContain(t testing.TB, err error, s string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), s) {
		t.Fatalf("error %v does not name %q", err, s)
	}
}

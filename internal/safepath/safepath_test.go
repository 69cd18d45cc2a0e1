//go:build linux

package safepath_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/internal/safepath"
)

func TestOpen(t *testing.T) {
	d := t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, "real", "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(d, "real"), filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}

	fd, err := safepath.Open("path", filepath.Join(d, "real", "sub"), false)
	if err != nil {
		t.Fatalf("Open of a plain path: %v", err)
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if err := unix.Stat(filepath.Join(d, "real", "sub"), &b); err != nil || a.Ino != b.Ino {
		t.Fatalf("Open found inode %d, want %d (%v)", a.Ino, b.Ino, err)
	}

	for _, p := range []string{filepath.Join(d, "link"), filepath.Join(d, "link", "sub"), filepath.Join(d, "link", "new", "dir")} {
		_, err := safepath.Open("path", p, true)
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("Open(%s): got %v, want FailedPrecondition", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(d, "real", "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open created a directory behind the symlink: %v", err)
	}

	_, err = safepath.Open("path", filepath.Join(d, "missing", "x"), false)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a missing path: got %v, want ErrNotExist", err)
	}
	fd, err = safepath.Open("path", filepath.Join(d, "made", "here"), true)
	if err != nil {
		t.Fatalf("Open with create: %v", err)
	}
	unix.Close(fd)
	if fi, err := os.Stat(filepath.Join(d, "made", "here")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750&^umask() {
		t.Fatalf("created directory: %v, %v", fi, err)
	}

	if err := os.WriteFile(filepath.Join(d, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := safepath.Open("path", filepath.Join(d, "file", "x"), false); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Open through a file: got %v, want FailedPrecondition", err)
	}
}

func umask() os.FileMode {
	m := unix.Umask(0)
	unix.Umask(m)
	return os.FileMode(m)
}

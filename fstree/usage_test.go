//go:build linux

package fstree_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/fstree"
	"github.com/csikit/csikit/internal/testenv"
)

func TestUsage(t *testing.T) {
	ctx := context.Background()
	d := tmpfs(t, "", "16m")
	vol := filepath.Join(d, "vol")
	write(t, filepath.Join(vol, "a/data"), strings.Repeat("u", 64<<10), 0o644)
	if err := os.Link(filepath.Join(vol, "a/data"), filepath.Join(vol, "hardlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(vol, "etc")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(vol, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	mnt := tmpfs(t, filepath.Join(vol, "mnt"), "4m")
	write(t, filepath.Join(mnt, "big"), strings.Repeat("m", 1<<20), 0o644)
	// A file bind-mounted onto a file of the tree is not counted either.
	write(t, filepath.Join(vol, "bound"), "", 0o644)
	if err := unix.Mount(filepath.Join(mnt, "big"), filepath.Join(vol, "bound"), "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(filepath.Join(vol, "bound"), unix.MNT_DETACH) })

	u, err := fstree.Usage(ctx, vol)
	if err != nil {
		t.Fatal(err)
	}
	var want fstree.UsageStats
	// root, a, a/data (= hardlink), etc, sparse; not mnt nor anything in it.
	for _, p := range []string{"", "a", "a/data", "etc", "sparse"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(vol, p), &st); err != nil {
			t.Fatal(err)
		}
		want.Bytes += st.Blocks * 512
		want.Inodes++
	}
	if u != want {
		t.Fatalf("Usage: got %+v, want %+v", u, want)
	}
	if u.Bytes >= 1<<20 {
		t.Fatalf("Usage counts %d bytes: the mount or the hole was counted", u.Bytes)
	}
	_, err = fstree.Usage(ctx, filepath.Join(d, "missing"))
	testenv.WantCode(t, err, codes.NotFound)
}

//go:build linux

package fstree_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/fstree"
	"github.com/csikit/csikit/internal/testenv"
)

func TestRemoveTree(t *testing.T) {
	ctx := context.Background()
	d := t.TempDir()
	outside := filepath.Join(d, "outside")
	write(t, filepath.Join(outside, "keep"), "host data", 0o644)
	vol := filepath.Join(d, "vol")
	write(t, filepath.Join(vol, "a/b/c/file"), "x", 0o644)
	write(t, filepath.Join(vol, "ro/file"), "x", 0o444)
	if err := os.Chmod(filepath.Join(vol, "ro"), 0o555); err != nil {
		t.Fatal(err)
	}
	for name, dest := range map[string]string{"to-dir": outside, "to-file": filepath.Join(outside, "keep"), "a/dangling": "/nonexistent"} {
		if err := os.Symlink(dest, filepath.Join(vol, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(filepath.Join(vol, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fstree.Remove(ctx, vol, fstree.RemoveOptions{}); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	wantMissing(t, vol)
	wantContent(t, filepath.Join(outside, "keep"), "host data")
	// Gone already: success.
	if err := fstree.Remove(ctx, vol, fstree.RemoveOptions{}); err != nil {
		t.Fatalf("Remove of a missing directory: %v", err)
	}
}

func TestRemoveKeepRoot(t *testing.T) {
	d := t.TempDir()
	write(t, filepath.Join(d, "vol/a/b"), "x", 0o644)
	if err := fstree.Remove(context.Background(), filepath.Join(d, "vol"), fstree.RemoveOptions{KeepRoot: true}); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(filepath.Join(d, "vol")); err != nil || len(ents) != 0 {
		t.Fatalf("root after KeepRoot: %v %v, want it empty", ents, err)
	}
}

func TestRemoveSymlinkRootRemovesOnlyTheLink(t *testing.T) {
	d := t.TempDir()
	write(t, filepath.Join(d, "target/keep"), "host data", 0o644)
	link := filepath.Join(d, "vol")
	if err := os.Symlink(filepath.Join(d, "target"), link); err != nil {
		t.Fatal(err)
	}
	if err := fstree.Remove(context.Background(), link, fstree.RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	wantMissing(t, link)
	wantContent(t, filepath.Join(d, "target/keep"), "host data")
	// KeepRoot on a symlink would mean emptying its target: refused.
	if err := os.Symlink(filepath.Join(d, "target"), link); err != nil {
		t.Fatal(err)
	}
	err := fstree.Remove(context.Background(), link, fstree.RemoveOptions{KeepRoot: true})
	testenv.WantCode(t, err, codes.FailedPrecondition)
	wantContent(t, filepath.Join(d, "target/keep"), "host data")
}

// TestRemoveRefusesMounts: a tmpfs below the tree (a volume still
// published) or at its root makes Remove refuse, naming the mount, and the
// mount's contents stay; nothing else in the tree is removed either.
func TestRemoveRefusesMounts(t *testing.T) {
	ctx := context.Background()
	d := t.TempDir()
	vol := filepath.Join(d, "vol")
	write(t, filepath.Join(vol, "a-first"), "x", 0o644)
	mnt := tmpfs(t, filepath.Join(vol, "b/pod/mount"), "1m")
	write(t, filepath.Join(mnt, "pod-data"), "precious", 0o644)
	err := fstree.Remove(ctx, vol, fstree.RemoveOptions{})
	testenv.WantCode(t, err, codes.FailedPrecondition)
	mustContain(t, err, mnt)
	wantContent(t, filepath.Join(mnt, "pod-data"), "precious")
	wantContent(t, filepath.Join(vol, "a-first"), "x")

	err = fstree.Remove(ctx, mnt, fstree.RemoveOptions{})
	testenv.WantCode(t, err, codes.FailedPrecondition)
	wantContent(t, filepath.Join(mnt, "pod-data"), "precious")
}

// TestRemoveRefusesBindMounts covers the mounts a device number does not
// give away: a host file bind-mounted onto a file of the tree and a
// directory of the same filesystem bind-mounted into it. Both are found
// before anything is removed, and the host's data survives.
func TestRemoveRefusesBindMounts(t *testing.T) {
	bindMountCases(t, func(t *testing.T, root, target, host string) {
		err := fstree.Remove(context.Background(), root, fstree.RemoveOptions{})
		testenv.WantCode(t, err, codes.FailedPrecondition)
		mustContain(t, err, target)
		wantContent(t, filepath.Join(root, "a-first"), "x")
		wantContent(t, filepath.Join(host, "secret"), "host key")
	})
}

// bindMountCases runs check, as root, on a tree root holding a file
// "a-first" and, at target deep below, a host file (host/secret, "host
// key") or the host directory bind-mounted: the mounts a device number
// does not give away. The mounts go at cleanup.
func bindMountCases(t *testing.T, check func(t *testing.T, root, target, host string)) {
	testenv.RequireRoot(t, "bind-mounts")
	d := t.TempDir()
	host := filepath.Join(d, "host")
	write(t, filepath.Join(host, "secret"), "host key", 0o600)
	for _, tc := range []struct{ name, target, source string }{
		{"file", "z/deep/token", filepath.Join(host, "secret")},
		{"dir", "z/deep/dir", host},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(d, "tree-"+tc.name)
			write(t, filepath.Join(root, "a-first"), "x", 0o644)
			target := filepath.Join(root, tc.target)
			if tc.name == "file" {
				write(t, target, "", 0o644)
			} else if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mount(tc.source, target, "", unix.MS_BIND, ""); err != nil {
				t.Fatalf("bind %s at %s: %v", tc.source, target, err)
			}
			t.Cleanup(func() {
				if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
					t.Errorf("unmount %s: %v", target, err)
				}
			})
			check(t, root, target, host)
		})
	}
}

// TestRemoveSymlinkSwapRace swaps a directory of the tree for a symlink
// to a host directory while Remove runs. The host directory must survive
// every time.
func TestRemoveSymlinkSwapRace(t *testing.T) {
	ctx := context.Background()
	d := t.TempDir()
	host := filepath.Join(d, "host")
	deadline := time.Now().Add(3 * time.Second)
	n := 0
	for ; n < 200 && time.Now().Before(deadline); n++ {
		write(t, filepath.Join(host, "keep"), "host data", 0o644)
		vol := filepath.Join(d, "vol")
		for i := range 20 {
			write(t, filepath.Join(vol, "d", string(rune('a'+i))), "x", 0o644)
		}
		if err := os.Symlink(host, filepath.Join(vol, "lnk")); err != nil {
			t.Fatal(err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(vol, "d"), unix.AT_FDCWD, filepath.Join(vol, "lnk"), unix.RENAME_EXCHANGE)
				if err != nil {
					return // Remove got there first
				}
			}
		}()
		err := fstree.Remove(ctx, vol, fstree.RemoveOptions{})
		stop.Store(true)
		wg.Wait()
		if err != nil && status.Code(err) != codes.Aborted {
			t.Fatalf("round %d: Remove: %v", n, err)
		}
		wantContent(t, filepath.Join(host, "keep"), "host data")
		if err := os.RemoveAll(vol); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d rounds", n)
}

func TestRemoveErrors(t *testing.T) {
	ctx := context.Background()
	testenv.WantCode(t, fstree.Remove(ctx, "relative", fstree.RemoveOptions{}), codes.InvalidArgument)
	testenv.WantCode(t, fstree.Remove(ctx, "/a/../b", fstree.RemoveOptions{}), codes.InvalidArgument)
	d := t.TempDir()
	write(t, filepath.Join(d, "vol/f"), "x", 0o644)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	testenv.WantCode(t, fstree.Remove(cctx, filepath.Join(d, "vol"), fstree.RemoveOptions{}), codes.Canceled)
	wantContent(t, filepath.Join(d, "vol/f"), "x")
}

//go:build linux

package fstree

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// chainDepth is deep enough that a walk closes descriptors and must
// re-open ancestors on its way back up.
const chainDepth = 3 * maxHeld

// makeChain makes chainDepth nested directories "d" below root, each with
// a file "f" holding "tenant".
func makeChain(t *testing.T, root string) {
	t.Helper()
	p := root
	for range chainDepth {
		p = filepath.Join(p, "d")
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "f"), []byte("tenant"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// levelPath is the path of a chain's level i below root.
func levelPath(root string, i int) string {
	return filepath.Join(root, strings.Repeat("d/", i))
}

// swapAttack is what a tenant does to the chain's level i while a walk is
// below it: it moves the child (so ".." leads elsewhere) and swaps level i
// for a symlink to outside, or for a fresh directory of its own.
func swapAttack(t *testing.T, root string, i int, outside string) {
	lvl := levelPath(root, i)
	if err := os.Rename(filepath.Join(lvl, "d"), filepath.Join(root, "moved")); err != nil {
		t.Error(err)
	}
	if err := os.Rename(lvl, filepath.Join(filepath.Dir(lvl), "old")); err != nil {
		t.Error(err)
	}
	if outside != "" {
		if err := os.Symlink(outside, lvl); err != nil {
			t.Error(err)
		}
	} else if err := os.Mkdir(lvl, 0o755); err != nil {
		t.Error(err)
	} else if err := os.WriteFile(filepath.Join(lvl, "f"), []byte("imposter"), 0o644); err != nil {
		t.Error(err)
	}
}

func setHook(t *testing.T, hook func(root string, level int)) {
	testHookReopen = hook
	t.Cleanup(func() { testHookReopen = nil })
}

// TestChainRefusesSwappedAncestor attacks the removal walk where a
// bounded chain differs from held descriptors: an ancestor whose
// descriptor was closed is swapped for a symlink to a host directory (or
// for another directory) while the walk is below it. The walk must notice
// (Aborted), never enter the symlink's target, and leave the host files;
// a retry then removes the whole tree and nothing else.
func TestChainRefusesSwappedAncestor(t *testing.T) {
	for _, symlink := range []bool{true, false} {
		d := t.TempDir()
		host := filepath.Join(d, "host")
		if err := os.MkdirAll(filepath.Join(host, "d"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(host, "f"), []byte("host data"), 0o644); err != nil {
			t.Fatal(err)
		}
		vol := filepath.Join(d, "vol")
		makeChain(t, vol)
		attacked := false
		setHook(t, func(root string, level int) {
			if root == vol && !attacked {
				attacked = true
				target := host
				if !symlink {
					target = ""
				}
				swapAttack(t, vol, level, target)
			}
		})
		fd, err := openRoot(vol)
		if err != nil {
			t.Fatal(err)
		}
		w := newWalker(context.Background())
		err = w.removeContents(fd, vol)
		w.release()
		unix.Close(fd)
		if !attacked {
			t.Fatal("the walk never re-opened an ancestor: make the chain deeper")
		}
		testHookReopen = nil
		if b, err := os.ReadFile(filepath.Join(host, "f")); err != nil || string(b) != "host data" {
			t.Fatalf("symlink=%t: host file after the attack: %q, %v", symlink, b, err)
		}
		if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "moved or replaced") {
			t.Fatalf("symlink=%t: removeContents after the swap: %v, want Aborted", symlink, err)
		}
		if err := Remove(context.Background(), vol, RemoveOptions{}); err != nil {
			t.Fatalf("symlink=%t: Remove after the attack: %v", symlink, err)
		}
		if _, err := os.Stat(filepath.Join(host, "d")); err != nil {
			t.Fatalf("symlink=%t: host directory after the retry: %v", symlink, err)
		}
		if b, err := os.ReadFile(filepath.Join(host, "f")); err != nil || string(b) != "host data" {
			t.Fatalf("symlink=%t: host file after the retry: %q, %v", symlink, b, err)
		}
	}
}

// TestChainFollowsRenamedAncestor: an ancestor renamed (not replaced)
// while the walk is below it is the same directory; the walk carries on,
// as it would holding its descriptor, and removes it all.
func TestChainFollowsRenamedAncestor(t *testing.T) {
	d := t.TempDir()
	vol := filepath.Join(d, "vol")
	makeChain(t, vol)
	attacked := false
	setHook(t, func(root string, level int) {
		if root == vol && !attacked {
			attacked = true
			lvl := levelPath(vol, level)
			if err := os.Rename(lvl, filepath.Join(filepath.Dir(lvl), "renamed")); err != nil {
				t.Error(err)
			}
		}
	})
	if err := Remove(context.Background(), vol, RemoveOptions{}); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if !attacked {
		t.Fatal("the walk never re-opened an ancestor")
	}
	if _, err := os.Lstat(vol); !os.IsNotExist(err) {
		t.Fatalf("vol after Remove: %v", err)
	}
}

// TestCopyRefusesSwappedAncestor: Copy's source walk, attacked the same
// way, fails with Aborted, leaves nothing at dst and never copies the
// host file the symlink leads to.
func TestCopyRefusesSwappedAncestor(t *testing.T) {
	d := t.TempDir()
	host := filepath.Join(d, "host")
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "f"), []byte("HOST-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, dst := filepath.Join(d, "src"), filepath.Join(d, "dst")
	makeChain(t, src)
	// The mount scan walks the source first; attack the copy's walk: the
	// second time the same level is re-opened.
	seen := map[int]int{}
	attacked := false
	setHook(t, func(root string, level int) {
		if root != src || attacked {
			return
		}
		if seen[level]++; seen[level] == 2 {
			attacked = true
			swapAttack(t, src, level, host)
		}
	})
	_, err := Copy(context.Background(), src, dst, CopyOptions{})
	if !attacked {
		t.Fatal("the copy never re-opened an ancestor")
	}
	_ = filepath.WalkDir(dst, func(p string, e os.DirEntry, err error) error {
		if b, _ := os.ReadFile(p); err == nil && e.Type().IsRegular() && strings.Contains(string(b), "HOST-SECRET") {
			t.Errorf("the copy read the host file through the swapped ancestor: %s", p)
		}
		return nil
	})
	if status.Code(err) != codes.Aborted {
		t.Fatalf("Copy after the swap: %v, want Aborted", err)
	}
	for _, p := range []string{dst, filepath.Join(d, ".dst.fstree-partial")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("%s after the failed copy: %v", p, err)
		}
	}
}

// TestChainHoldsFewDescriptors walks deep with the chain and counts the
// process's open descriptors at the bottom.
func TestChainHoldsFewDescriptors(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "vol")
	makeChain(t, vol)
	before := openFDs(t)
	most := 0
	setHook(t, func(root string, level int) {
		most = max(most, openFDs(t)-before)
	})
	if err := Remove(context.Background(), vol, RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if most == 0 || most > maxHeld+1 {
		t.Fatalf("the walk held %d descriptors more than before it, want at most %d", most, maxHeld+1)
	}
}

func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

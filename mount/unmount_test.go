//go:build linux

package mount_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/csikit/csikit/mount"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

func TestUnpublishCorruptFUSE(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	for _, name := range []string{"Unpublish", "Unstage"} {
		t.Run(name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "vol")
			if err := os.Mkdir(target, 0o750); err != nil {
				t.Fatal(err)
			}
			deadFUSE(t, target)
			_, err := m.IsMountPoint(ctx, target)
			if err != nil && !mount.IsCorruptedMount(err) {
				t.Fatalf("IsMountPoint on dead FUSE: got %v, want nil or a corrupted-mount error", err)
			}
			if name == "Unpublish" {
				err = m.Unpublish(ctx, target, mount.UnmountOptions{})
			} else {
				err = m.Unstage(ctx, target, mount.UnmountOptions{})
			}
			if err != nil {
				t.Fatalf("%s of a dead FUSE mount: %v", name, err)
			}
			if mounted(target) {
				t.Fatal("dead FUSE mount still there")
			}
			_, err = os.Lstat(target)
			if gone := errors.Is(err, os.ErrNotExist); gone != (name == "Unpublish") {
				t.Fatalf("target after %s: got Lstat error %v, want removed=%t", name, err, name == "Unpublish")
			}
		})
	}
}

func TestPublishAndStageReplaceCorruptMount(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "data"), "fresh")
	target := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(target, 0o750); err != nil {
		t.Fatal(err)
	}
	cleanupMounts(t, target)
	deadFUSE(t, target)
	if err := m.Publish(ctx, mount.PublishOptions{Source: src, Target: target, AllowUnmountedSource: true}); err != nil {
		t.Fatalf("Publish over a dead FUSE mount: %v", err)
	}
	wantFile(t, filepath.Join(target, "data"), "fresh")
	if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}

	staging := t.TempDir()
	deadFUSE(t, staging)
	if err := m.Stage(ctx, mount.StageOptions{Device: "csikit-tmpfs", Target: staging, FSType: "tmpfs"}); err != nil {
		t.Fatalf("Stage over a dead FUSE mount: %v", err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(staging, &sfs); err != nil || sfs.Type != unix.TMPFS_MAGIC {
		t.Fatalf("statfs staging: got type %#x, %v, want tmpfs", sfs.Type, err)
	}
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestUnpublishBusyKeepsData(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "data"), "precious")
	target := filepath.Join(t.TempDir(), "vol")
	cleanupMounts(t, target)
	if err := m.Publish(ctx, mount.PublishOptions{Source: src, Target: target, AllowUnmountedSource: true}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(target, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wantCode(t, m.Unpublish(ctx, target, mount.UnmountOptions{}), codes.FailedPrecondition)
	if !mounted(target) {
		t.Fatal("busy target got unmounted without Lazy")
	}
	wantFile(t, filepath.Join(target, "data"), "precious")
	// Lazily: detached at once, the open file keeps working, data stays.
	if err := m.Unpublish(ctx, target, mount.UnmountOptions{Lazy: true}); err != nil {
		t.Fatalf("lazy Unpublish: %v", err)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("target after lazy Unpublish: got %v, want removed", err)
	}
	buf := make([]byte, 8)
	if n, err := f.ReadAt(buf, 0); n != 8 || string(buf) != "precious" {
		t.Fatalf("read through the detached mount: got %q, %v, want precious", buf[:n], err)
	}
	wantFile(t, filepath.Join(src, "data"), "precious")
}

func TestUnpublishNeverDeletesContents(t *testing.T) {
	ctx := context.Background()
	m := mount.New(mount.Options{})
	// Not a mount point but holding files: a wrongly detected mount, or a
	// volume written into the node's disk. os.Remove refuses; nothing goes.
	target := filepath.Join(t.TempDir(), "vol")
	if err := os.MkdirAll(filepath.Join(target, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(target, "sub", "data"), "precious")
	wantCode(t, m.Unpublish(ctx, target, mount.UnmountOptions{}), codes.FailedPrecondition)
	wantFile(t, filepath.Join(target, "sub", "data"), "precious")

	missing := filepath.Join(t.TempDir(), "never-created")
	if err := m.Unpublish(ctx, missing, mount.UnmountOptions{}); err != nil {
		t.Fatalf("Unpublish of a missing target: got %v, want nil", err)
	}
	if err := m.Unstage(ctx, missing, mount.UnmountOptions{}); err != nil {
		t.Fatalf("Unstage of a missing target: got %v, want nil", err)
	}
	empty := t.TempDir()
	if err := m.Unstage(ctx, empty, mount.UnmountOptions{}); err != nil {
		t.Fatalf("Unstage of an unmounted directory: got %v, want nil", err)
	}
	if _, err := os.Stat(empty); err != nil {
		t.Fatalf("Unstage removed the staging directory: %v", err)
	}
}

func TestUnpublishStackedMounts(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	src := t.TempDir()
	target := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(target, 0o750); err != nil {
		t.Fatal(err)
	}
	cleanupMounts(t, target)
	for i := 0; i < 3; i++ { // stacked by some other, careless component
		if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
		t.Fatalf("Unpublish of 3 stacked binds: %v", err)
	}
	if mounted(target) {
		t.Fatal("target still mounted")
	}
}

// TestPublishUnpublishRace hammers one target with concurrent Publish and
// Unpublish calls from two Mounters (as two driver processes would; their
// in-process locks do not help each other) while the staging file system
// holds data. Whatever interleaving happens, the data must survive.
func TestPublishUnpublishRace(t *testing.T) {
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	dev, _ := loopDevice(t, 64<<20)
	ctx := context.Background()
	staging := filepath.Join(t.TempDir(), "staging")
	target := filepath.Join(t.TempDir(), "pods", "vol")
	cleanupMounts(t, staging, target)
	setup := mount.New(mount.Options{})
	if err := setup.Stage(ctx, mount.StageOptions{Device: dev, Target: staging}); err != nil {
		t.Fatal(err)
	}
	const files = 20
	for i := 0; i < files; i++ {
		if err := os.MkdirAll(filepath.Join(staging, "dir", fmt.Sprint(i)), 0o750); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(staging, "dir", fmt.Sprint(i), "data"), fmt.Sprint("content ", i))
	}

	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		m := mount.New(mount.Options{}) // a Mounter per worker: no shared locks
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				var err error
				if (i+w)%2 == 0 {
					err = m.Publish(ctx, mount.PublishOptions{Source: staging, Target: target})
				} else {
					err = m.Unpublish(ctx, target, mount.UnmountOptions{Lazy: i%3 == 0})
				}
				_ = err // losing a race may give an error; losing data may not
			}
		}()
	}
	wg.Wait()
	if err := setup.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
		t.Fatalf("final Unpublish: %v", err)
	}
	if mounted(target) {
		t.Fatal("target still mounted after final Unpublish")
	}
	for i := 0; i < files; i++ {
		wantFile(t, filepath.Join(staging, "dir", fmt.Sprint(i), "data"), fmt.Sprint("content ", i))
	}
	if err := setup.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
}

//go:build linux

package mount_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/csikit/csikit/mount"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

func TestPublishBindSameFileSystem(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	// Source and target on one file system: a device-number comparison
	// with the parent (the classic IsLikelyNotMountPoint) cannot see this
	// bind; a wrong "not mounted" here is how RemoveAll destroys volumes.
	root := t.TempDir()
	src := filepath.Join(root, "staging")
	target := filepath.Join(root, "pods", "uid", "volumes", "vol")
	if err := os.Mkdir(src, 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(src, "data"), "precious")
	cleanupMounts(t, target)

	opts := mount.PublishOptions{Source: src, Target: target, AllowUnmountedSource: true}
	for i := 0; i < 2; i++ {
		if err := m.Publish(ctx, opts); err != nil {
			t.Fatalf("Publish #%d: %v", i+1, err)
		}
	}
	if got, err := m.IsMountPoint(ctx, target); err != nil || !got {
		t.Fatalf("IsMountPoint(target): got %t, %v, want true", got, err)
	}
	if got, err := m.IsMountPoint(ctx, src); err != nil || got {
		t.Fatalf("IsMountPoint(source): got %t, %v, want false", got, err)
	}
	wantFile(t, filepath.Join(target, "data"), "precious")
	wantCode(t, m.Publish(ctx, mount.PublishOptions{Source: src, Target: target, ReadOnly: true, AllowUnmountedSource: true}), codes.AlreadyExists)
	other := t.TempDir()
	wantCode(t, m.Publish(ctx, mount.PublishOptions{Source: other, Target: target, AllowUnmountedSource: true}), codes.AlreadyExists)

	for i := 0; i < 2; i++ {
		if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
			t.Fatalf("Unpublish #%d: %v", i+1, err)
		}
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("target after Unpublish: got %v, want removed", err)
	}
	wantFile(t, filepath.Join(src, "data"), "precious")
}

func TestPublishReadOnlyKeepsFlags(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	// The source is a nosuid,nodev tmpfs: the read-only bind keeps both.
	src := t.TempDir()
	if err := unix.Mount("tmpfs", src, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4m"); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "vol")
	cleanupMounts(t, src, target)
	writeFile(t, filepath.Join(src, "f"), "x")

	opts := mount.PublishOptions{Source: src, Target: target, ReadOnly: true, MountFlags: []string{"noexec"}}
	for i := 0; i < 2; i++ {
		if err := m.Publish(ctx, opts); err != nil {
			t.Fatalf("Publish #%d: %v", i+1, err)
		}
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(target, &sfs); err != nil {
		t.Fatal(err)
	}
	want := int64(unix.ST_RDONLY | unix.ST_NOSUID | unix.ST_NODEV | unix.ST_NOEXEC)
	if sfs.Flags&want != want {
		t.Fatalf("statfs flags of target: got %#x, want %#x set", sfs.Flags, want)
	}
	if err := os.WriteFile(filepath.Join(target, "g"), nil, 0o600); err == nil {
		t.Fatal("write through the read-only bind: got success, want EROFS")
	}
	// The source stays writable.
	writeFile(t, filepath.Join(src, "g"), "y")
	wantCode(t, m.Publish(ctx, mount.PublishOptions{Source: src, Target: target}), codes.AlreadyExists)
	if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestPublishBadInput(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	src := t.TempDir()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFile(t, file, "")
	wantCode(t, m.Publish(ctx, mount.PublishOptions{Source: src, Target: "rel"}), codes.InvalidArgument)
	wantCode(t, m.Publish(ctx, mount.PublishOptions{Source: src + "/..", Target: dir + "/t"}), codes.InvalidArgument)
	wantCode(t, m.Publish(ctx, mount.PublishOptions{Source: src, Target: dir + "/t", MountFlags: []string{"size=1m"}}), codes.InvalidArgument)
	wantCode(t, m.Publish(ctx, mount.PublishOptions{Source: filepath.Join(dir, "missing"), Target: dir + "/t"}), codes.FailedPrecondition)
	wantCode(t, m.Publish(ctx, mount.PublishOptions{Source: file, Target: dir + "/t"}), codes.InvalidArgument)
	wantCode(t, m.Publish(ctx, mount.PublishOptions{Source: src, Target: file, AllowUnmountedSource: true}), codes.FailedPrecondition)
	if mounted(file) {
		t.Fatal("a file target got mounted")
	}
}

// TestPublishRefusesFileSystemFlags: flags a bind remount silently ignores
// (sync, dirsync, lazytime) are refused before anything is mounted, so a
// caller never believes they hold.
func TestPublishRefusesFileSystemFlags(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	src := t.TempDir()
	for _, f := range []string{"sync", "dirsync", "lazytime", "sanity-no-such-mount-option"} {
		target := filepath.Join(t.TempDir(), "t")
		cleanupMounts(t, target)
		err := m.Publish(ctx, mount.PublishOptions{Source: src, Target: target, AllowUnmountedSource: true, MountFlags: []string{"noexec", f}})
		wantCode(t, err, codes.InvalidArgument)
		if mounted(target) {
			t.Errorf("Publish with %q: target mounted, want nothing", f)
		}
	}
}

func TestPublishFromStagedExt4(t *testing.T) {
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	dev, _ := loopDevice(t, 64<<20)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	staging := filepath.Join(t.TempDir(), "staging")
	target := filepath.Join(t.TempDir(), "target")
	cleanupMounts(t, staging, target)
	if err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: staging}); err != nil {
		t.Fatal(err)
	}
	if err := m.Publish(ctx, mount.PublishOptions{Source: staging, Target: target}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(target, "via-target"), "1")
	wantFile(t, filepath.Join(staging, "via-target"), "1")
	// Out-of-order Unstage: the kernel keeps the file system alive for the
	// bind, nothing is lost, and both calls succeed.
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
	wantFile(t, filepath.Join(target, "via-target"), "1")
	if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: staging}); err != nil {
		t.Fatal(err)
	}
	wantFile(t, filepath.Join(staging, "via-target"), "1")
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
}

//go:build linux

package mount_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/mount"
)

// tmpfsAt mounts a fresh tmpfs at dir (created) and unmounts it at the end.
func tmpfsAt(t testing.TB, dir string) {
	t.Helper()
	requireRoot(t)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	cleanupMounts(t, dir)
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs at %s: %v", dir, err)
	}
}

// TestUnpublishRemovesOnlyWhatPublishMade: after unmounting, Unpublish
// removes an empty directory or an empty file (a block target), and leaves
// a file with data, a symlink, or anything else alone with
// FailedPrecondition.
func TestUnpublishRemovesOnlyWhatPublishMade(t *testing.T) {
	ctx := context.Background()
	m := mount.New(mount.Options{})
	d := t.TempDir()

	data := filepath.Join(d, "data-file")
	writeFile(t, data, "precious host file")
	wantCode(t, m.Unpublish(ctx, data, mount.UnmountOptions{}), codes.FailedPrecondition)
	wantFile(t, data, "precious host file")

	link := filepath.Join(d, "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	wantCode(t, m.Unpublish(ctx, link, mount.UnmountOptions{}), codes.FailedPrecondition)
	if _, err := os.Lstat(link); err != nil {
		t.Fatalf("symlink at the target was removed: %v", err)
	}
	wantFile(t, data, "precious host file")

	fifo := filepath.Join(d, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	wantCode(t, m.Unpublish(ctx, fifo, mount.UnmountOptions{}), codes.FailedPrecondition)

	for _, p := range []string{filepath.Join(d, "empty-file"), filepath.Join(d, "empty-dir")} {
		if strings.HasSuffix(p, "dir") {
			if err := os.Mkdir(p, 0o750); err != nil {
				t.Fatal(err)
			}
		} else {
			writeFile(t, p, "")
		}
		if err := m.Unpublish(ctx, p, mount.UnmountOptions{}); err != nil {
			t.Fatalf("Unpublish(%s): %v", p, err)
		}
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("%s after Unpublish: %v, want removed", p, err)
		}
	}
}

// TestPublishRefusesSymlinks: a symlink anywhere in the target path (a
// parent or the target itself) or in the source path is refused with
// FailedPrecondition, and nothing is mounted or created where it points.
func TestPublishRefusesSymlinks(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	d := t.TempDir()
	staging := filepath.Join(d, "staging")
	tmpfsAt(t, staging)
	writeFile(t, filepath.Join(staging, "data"), "volume")
	elsewhere := filepath.Join(d, "elsewhere")
	if err := os.MkdirAll(filepath.Join(elsewhere, "mount"), 0o750); err != nil {
		t.Fatal(err)
	}
	pods := filepath.Join(d, "pods")
	if err := os.Mkdir(pods, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(pods, "uid")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(elsewhere, "mount"), filepath.Join(pods, "target-link")); err != nil {
		t.Fatal(err)
	}
	cleanupMounts(t, filepath.Join(elsewhere, "mount"), filepath.Join(elsewhere, "new", "mount"))
	for _, target := range []string{
		filepath.Join(pods, "uid", "mount"),        // existing dir behind a symlinked parent
		filepath.Join(pods, "uid", "new", "mount"), // would be created behind it
		filepath.Join(pods, "target-link"),         // the target itself
	} {
		err := m.Publish(ctx, mount.PublishOptions{Source: staging, Target: target})
		wantCode(t, err, codes.FailedPrecondition)
		if !strings.Contains(err.Error(), "symlink") {
			t.Errorf("error %v does not say why", err)
		}
	}
	if mounted(filepath.Join(elsewhere, "mount")) {
		t.Fatalf("a bind mount landed behind the symlink")
	}
	if _, err := os.Lstat(filepath.Join(elsewhere, "new")); !os.IsNotExist(err) {
		t.Fatalf("Publish created a directory behind the symlink: %v", err)
	}

	// A symlinked source path is refused the same way.
	if err := os.Symlink(staging, filepath.Join(d, "staging-link")); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(pods, "real", "mount")
	cleanupMounts(t, target)
	wantCode(t, m.Publish(ctx, mount.PublishOptions{Source: filepath.Join(d, "staging-link"), Target: target}), codes.FailedPrecondition)
	if mounted(target) {
		t.Fatal("published through a symlinked source")
	}
	// Unpublish does not follow a symlinked parent either.
	wantCode(t, m.Unpublish(ctx, filepath.Join(pods, "uid", "mount"), mount.UnmountOptions{}), codes.FailedPrecondition)
	if _, err := os.Lstat(filepath.Join(elsewhere, "mount")); err != nil {
		t.Fatalf("Unpublish removed the directory behind the symlink: %v", err)
	}

	// Stage and Unstage refuse a symlinked staging path the same way.
	stageAt := filepath.Join(pods, "uid", "staging")
	cleanupMounts(t, filepath.Join(elsewhere, "staging"))
	err := m.Stage(ctx, mount.StageOptions{Device: "tmpfs", FSType: "tmpfs", Target: stageAt})
	wantCode(t, err, codes.FailedPrecondition)
	if _, err := os.Lstat(filepath.Join(elsewhere, "staging")); !os.IsNotExist(err) {
		t.Fatalf("Stage created or mounted behind the symlink: %v", err)
	}
	tmpfsAt(t, filepath.Join(elsewhere, "staged"))
	wantCode(t, m.Unstage(ctx, filepath.Join(pods, "uid", "staged"), mount.UnmountOptions{}), codes.FailedPrecondition)
	if !mounted(filepath.Join(elsewhere, "staged")) {
		t.Fatal("Unstage unmounted through a symlinked parent")
	}

	// The same paths without symlinks work.
	if err := m.Publish(ctx, mount.PublishOptions{Source: staging, Target: target}); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	wantFile(t, filepath.Join(target, "data"), "volume")
	if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPublishRefusesUnmountedSource: a staging path that holds no mount
// (the stage failed or was undone) is not published; the pod would write to
// the node's disk. A driver publishing its own plain directories says so.
func TestPublishRefusesUnmountedSource(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	d := t.TempDir()
	staging := filepath.Join(d, "staging")
	if err := os.Mkdir(staging, 0o750); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(d, "target")
	cleanupMounts(t, target)
	err := m.Publish(ctx, mount.PublishOptions{Source: staging, Target: target})
	wantCode(t, err, codes.FailedPrecondition)
	if mounted(target) {
		t.Fatal("published an unmounted staging path")
	}
	if err := m.Publish(ctx, mount.PublishOptions{Source: staging, Target: target, AllowUnmountedSource: true}); err != nil {
		t.Fatalf("Publish of a plain directory with AllowUnmountedSource: %v", err)
	}
	if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}

	// SourceDevice: the mount at the source must be of that device.
	dev, _ := loopDevice(t, 64<<20)
	other, _ := loopDevice(t, 64<<20)
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	if err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: staging}); err != nil {
		t.Fatal(err)
	}
	cleanupMounts(t, staging)
	wantCode(t, m.Publish(ctx, mount.PublishOptions{Source: staging, Target: target, SourceDevice: other}), codes.FailedPrecondition)
	if mounted(target) {
		t.Fatal("published a staging path holding another device")
	}
	if err := m.Publish(ctx, mount.PublishOptions{Source: staging, Target: target, SourceDevice: dev}); err != nil {
		t.Fatalf("Publish with the right SourceDevice: %v", err)
	}
	if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestRepeatNeedsSameMount: a repeated Publish or Stage is OK only when the
// same file system (by device identity, not by source name), type, flags
// and read-only setting are there.
func TestRepeatNeedsSameMount(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	d := t.TempDir()

	// Stage: two tmpfs volumes with the same source name.
	staging := filepath.Join(d, "staging")
	cleanupMounts(t, staging)
	opts := mount.StageOptions{Device: "tmpfs", Target: staging, FSType: "tmpfs", MountFlags: []string{"size=1m"}}
	if err := m.Stage(ctx, opts); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(staging, "volume-a"), "a")
	if err := m.Stage(ctx, opts); err != nil {
		t.Fatalf("repeat Stage: %v", err)
	}
	// Other flags on the same file system.
	noexec := opts
	noexec.MountFlags = []string{"size=1m", "noexec"}
	wantCode(t, m.Stage(ctx, noexec), codes.AlreadyExists)
	// Another tmpfs mounted there in its place (another volume).
	if err := unix.Unmount(staging, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", staging, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, m.Stage(ctx, opts), codes.AlreadyExists)
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}

	// Stage of a block device with other flags, or as another type.
	dev, _ := loopDevice(t, 64<<20)
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	ext4 := mount.StageOptions{Device: dev, Target: staging, FSType: "ext4", MountFlags: []string{"nosuid"}}
	if err := m.Stage(ctx, ext4); err != nil {
		t.Fatal(err)
	}
	if err := m.Stage(ctx, ext4); err != nil {
		t.Fatalf("repeat Stage of ext4: %v", err)
	}
	plain := ext4
	plain.MountFlags = nil
	wantCode(t, m.Stage(ctx, plain), codes.AlreadyExists)
	ext3 := ext4
	ext3.FSType = "ext3"
	wantCode(t, m.Stage(ctx, ext3), codes.AlreadyExists)

	// Publish with other flags.
	target := filepath.Join(d, "target")
	cleanupMounts(t, target)
	pub := mount.PublishOptions{Source: staging, Target: target, MountFlags: []string{"noexec"}}
	if err := m.Publish(ctx, pub); err != nil {
		t.Fatal(err)
	}
	if err := m.Publish(ctx, pub); err != nil {
		t.Fatalf("repeat Publish: %v", err)
	}
	pub.MountFlags = nil
	wantCode(t, m.Publish(ctx, pub), codes.AlreadyExists)
	if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPublishSymlinkSwapRace exchanges a parent directory of the target
// with a symlink to another directory as fast as it can while Publish and
// Unpublish run. Publish may refuse (it saw the symlink) or succeed, but a
// bind mount must never land in the other directory.
func TestPublishSymlinkSwapRace(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	d := t.TempDir()
	staging := filepath.Join(d, "staging")
	tmpfsAt(t, staging)
	pods := filepath.Join(d, "pods")
	real := filepath.Join(pods, "uid")
	elsewhere := filepath.Join(d, "elsewhere")
	for _, p := range []string{filepath.Join(real, "mount"), filepath.Join(elsewhere, "mount")} {
		if err := os.MkdirAll(p, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	swap := filepath.Join(pods, "swap")
	if err := os.Symlink(elsewhere, swap); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(real, "mount")
	// Wherever the real directory is when the test ends, unmount there.
	cleanupMounts(t, target, filepath.Join(swap, "mount"), filepath.Join(elsewhere, "mount"))

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, real, unix.AT_FDCWD, swap, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("exchange: %v", err)
				return
			}
		}
	}()
	published, refused := 0, 0
	for i := 0; i < 300; i++ {
		err := m.Publish(ctx, mount.PublishOptions{Source: staging, Target: target})
		if err == nil {
			published++
		} else {
			refused++
		}
		if mounted(filepath.Join(elsewhere, "mount")) {
			close(stop)
			<-done
			t.Fatalf("round %d: a bind mount landed in %s", i, elsewhere)
		}
		// Unpublish may be refused while the path is a symlink; the mount
		// stays on the real directory until a later round.
		_ = m.Unpublish(ctx, target, mount.UnmountOptions{})
	}
	close(stop)
	<-done
	// Put the real directory back at its name and clean up.
	var st unix.Stat_t
	if err := unix.Lstat(real, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		if err := unix.Renameat2(unix.AT_FDCWD, real, unix.AT_FDCWD, swap, unix.RENAME_EXCHANGE); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Unpublish(ctx, target, mount.UnmountOptions{}); err != nil && mounted(target) {
		t.Fatalf("final Unpublish: %v", err)
	}
	if mounted(filepath.Join(elsewhere, "mount")) {
		t.Fatal("a bind mount landed in the other directory")
	}
	t.Logf("%d published, %d refused", published, refused)
	if published == 0 || refused == 0 {
		t.Logf("the race did not hit both outcomes this time")
	}
}

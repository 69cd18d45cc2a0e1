//go:build linux

package mount_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/csikit/csikit/mount"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

func TestStageExt4FormatsOnceAndIsIdempotent(t *testing.T) {
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	dev, _ := loopDevice(t, 64<<20)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	staging := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, staging)

	opts := mount.StageOptions{Device: dev, Target: staging, FSType: "ext4", MountFlags: []string{"noatime", "errors=remount-ro"}}
	for i := 0; i < 2; i++ {
		if err := m.Stage(ctx, opts); err != nil {
			t.Fatalf("Stage #%d: %v", i+1, err)
		}
	}
	if !mounted(staging) {
		t.Fatalf("staging %s: got not mounted, want mounted", staging)
	}
	if got, err := m.DiskFormat(ctx, dev); err != nil || got != "ext4" {
		t.Fatalf("DiskFormat: got %q, %v, want ext4", got, err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(staging, &sfs); err != nil {
		t.Fatal(err)
	}
	if sfs.Flags&unix.ST_NOATIME == 0 {
		t.Errorf("statfs flags %#x: want ST_NOATIME from the noatime option", sfs.Flags)
	}
	writeFile(t, filepath.Join(staging, "data"), "precious")

	// Unstage twice, stage again: the file system is reused, not reformatted.
	for i := 0; i < 2; i++ {
		if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
			t.Fatalf("Unstage #%d: %v", i+1, err)
		}
	}
	if mounted(staging) {
		t.Fatal("staging still mounted after Unstage")
	}
	if err := m.Stage(ctx, opts); err != nil {
		t.Fatalf("Stage after Unstage: %v", err)
	}
	wantFile(t, filepath.Join(staging, "data"), "precious")

	// Incompatible retries.
	ro := opts
	ro.ReadOnly = true
	wantCode(t, m.Stage(ctx, ro), codes.AlreadyExists)
	other, _ := loopDevice(t, 64<<20)
	wantCode(t, m.Stage(ctx, mount.StageOptions{Device: other, Target: staging}), codes.AlreadyExists)
	wantFile(t, filepath.Join(staging, "data"), "precious")

	// A second target for the same device, with a different type: refused.
	xfs := mount.StageOptions{Device: dev, Target: filepath.Join(t.TempDir(), "s2"), FSType: "xfs"}
	cleanupMounts(t, xfs.Target)
	wantCode(t, m.Stage(ctx, xfs), codes.FailedPrecondition)

	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestStageRefusesToFormat(t *testing.T) {
	requireTool(t, "mkfs.xfs", "xfsprogs")
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	ctx := context.Background()
	m := mount.New(mount.Options{})

	t.Run("other file system", func(t *testing.T) {
		dev, _ := loopDevice(t, 320<<20)
		if out, err := mount.ExecRunner().Run(ctx, "mkfs.xfs", "-q", dev); err != nil {
			t.Fatalf("mkfs.xfs: %v: %s", err, out)
		}
		staging := filepath.Join(t.TempDir(), "staging")
		cleanupMounts(t, staging)
		wantCode(t, m.Stage(ctx, mount.StageOptions{Device: dev, Target: staging, FSType: "ext4"}), codes.FailedPrecondition)
		if got, err := m.DiskFormat(ctx, dev); err != nil || got != "xfs" {
			t.Fatalf("DiskFormat after refused stage: got %q, %v, want xfs untouched", got, err)
		}
		if mounted(staging) {
			t.Fatal("staging mounted after a refused stage")
		}
		// Asking for what is there works.
		if err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: staging, FSType: "xfs"}); err != nil {
			t.Fatalf("Stage xfs: %v", err)
		}
		if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("blank read-only", func(t *testing.T) {
		dev, _ := loopDevice(t, 32<<20)
		staging := filepath.Join(t.TempDir(), "staging")
		cleanupMounts(t, staging)
		wantCode(t, m.Stage(ctx, mount.StageOptions{Device: dev, Target: staging, ReadOnly: true}), codes.FailedPrecondition)
		if got, err := m.DiskFormat(ctx, dev); err != nil || got != "" {
			t.Fatalf("DiskFormat: got %q, %v, want blank", got, err)
		}
	})
}

func TestStageXFSReadOnly(t *testing.T) {
	requireTool(t, "mkfs.xfs", "xfsprogs")
	dev, _ := loopDevice(t, 320<<20)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	staging := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, staging)
	rw := mount.StageOptions{Device: dev, Target: staging, FSType: "xfs", FormatOptions: []string{"-L", "csikit"}}
	if err := m.Stage(ctx, rw); err != nil {
		t.Fatalf("Stage xfs: %v", err)
	}
	writeFile(t, filepath.Join(staging, "f"), "x")
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
	ro := rw
	ro.ReadOnly = true
	if err := m.Stage(ctx, ro); err != nil {
		t.Fatalf("Stage read-only: %v", err)
	}
	if err := m.Stage(ctx, ro); err != nil {
		t.Fatalf("Stage read-only again: %v", err)
	}
	wantFile(t, filepath.Join(staging, "f"), "x")
	if err := unix.Access(staging, unix.W_OK); err != unix.EROFS {
		t.Fatalf("access(W_OK) on read-only stage: got %v, want EROFS", err)
	}
	wantCode(t, m.Stage(ctx, rw), codes.AlreadyExists)
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestStageTmpfs(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	staging := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, staging)
	opts := mount.StageOptions{Device: "csikit-tmpfs", Target: staging, FSType: "tmpfs", MountFlags: []string{"size=8m", "mode=0700"}}
	for i := 0; i < 2; i++ {
		if err := m.Stage(ctx, opts); err != nil {
			t.Fatalf("Stage tmpfs #%d: %v", i+1, err)
		}
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(staging, &sfs); err != nil {
		t.Fatal(err)
	}
	if sfs.Type != unix.TMPFS_MAGIC || sfs.Blocks*uint64(sfs.Bsize) != 8<<20 {
		t.Fatalf("statfs: got type %#x size %d, want tmpfs of %d bytes", sfs.Type, sfs.Blocks*uint64(sfs.Bsize), 8<<20)
	}
	wantCode(t, m.Stage(ctx, mount.StageOptions{Device: "other", Target: staging, FSType: "tmpfs"}), codes.AlreadyExists)
	if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestStageBadInput(t *testing.T) {
	ctx := context.Background()
	m := mount.New(mount.Options{})
	dir := t.TempDir()
	for _, o := range []mount.StageOptions{
		{Device: "/dev/null", Target: "relative"},
		{Device: "/dev/null", Target: dir + "/../x"},
		{Device: "", Target: dir},
		{Device: "-oexec", Target: dir},
		{Device: "/dev/../dev/null", Target: dir},
		{Device: "/dev/null", Target: dir, FSType: "../../bin/sh"},
		{Device: "/dev/null", Target: dir, MountFlags: []string{"bind"}},
		{Device: "/dev/null", Target: dir},               // not a block device
		{Device: filepath.Join(dir, "img"), Target: dir}, // not a block device either
	} {
		if o.Device == filepath.Join(dir, "img") {
			writeFile(t, o.Device, "")
		}
		wantCode(t, m.Stage(ctx, o), codes.InvalidArgument)
	}
	wantCode(t, m.Stage(ctx, mount.StageOptions{Device: "/dev/csikit-missing", Target: dir}), codes.NotFound)
}

// TestStageXFSCopyBesideSource: a block copy of an xfs volume (what a
// clone or a restored snapshot is) has its source's UUID; Stage mounts it
// beside its source, and with XFSUUIDCheck refuses it as xfs would.
func TestStageXFSCopyBesideSource(t *testing.T) {
	requireTool(t, "mkfs.xfs", "xfsprogs")
	src, _ := loopDevice(t, 320<<20)
	cp, _ := loopDevice(t, 320<<20)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	dir := t.TempDir()
	s1, s2 := filepath.Join(dir, "src"), filepath.Join(dir, "copy")
	cleanupMounts(t, s1, s2)
	if err := m.Stage(ctx, mount.StageOptions{Device: src, Target: s1, FSType: "xfs"}); err != nil {
		t.Fatalf("Stage the source: %v", err)
	}
	writeFile(t, filepath.Join(s1, "f"), "from the source")
	if err := m.Unstage(ctx, s1, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
	copyDevice(t, src, cp)
	// The source as xfs alone mounts it (a nouuid mount does not enter
	// its UUID in the kernel's table, so it would hide the conflict).
	if err := m.Stage(ctx, mount.StageOptions{Device: src, Target: s1, FSType: "xfs", XFSUUIDCheck: true}); err != nil {
		t.Fatalf("Stage the source again: %v", err)
	}
	err := m.Stage(ctx, mount.StageOptions{Device: cp, Target: s2, FSType: "xfs", XFSUUIDCheck: true})
	if err == nil || mounted(s2) {
		t.Fatalf("with XFSUUIDCheck, a copy with a mounted UUID staged (err %v)", err)
	}
	if err := m.Stage(ctx, mount.StageOptions{Device: cp, Target: s2, FSType: "xfs"}); err != nil {
		t.Fatalf("Stage a copy beside its source: %v", err)
	}
	wantFile(t, filepath.Join(s2, "f"), "from the source")
	for _, p := range []string{s2, s1} {
		if err := m.Unstage(ctx, p, mount.UnmountOptions{}); err != nil {
			t.Error(err)
		}
	}
}

// copyDevice copies block device from onto block device to, byte for
// byte, and flushes it.
func copyDevice(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Sync(); err != nil {
		t.Fatal(err)
	}
}

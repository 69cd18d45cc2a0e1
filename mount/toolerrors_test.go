//go:build linux

package mount_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csikit/csikit/caps"
	"github.com/csikit/csikit/mount"
	"google.golang.org/grpc/codes"
)

// The tests below drive the Mounter into the real failures of the tools it
// runs and check that the error names the tool's reason, not a line of its
// progress or usage text, with the same gRPC code as before.

// TestStageXFSTooSmallNamesCause formats a 64 MiB device as xfs: mkfs.xfs
// refuses with "Filesystem must be larger than 300MB." and then prints its
// whole usage text, whose last line used to be the message.
func TestStageXFSTooSmallNamesCause(t *testing.T) {
	requireTool(t, "mkfs.xfs", "xfsprogs")
	dev, _ := loopDevice(t, 64<<20)
	target := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, target)
	err := mount.New(mount.Options{}).Stage(context.Background(), mount.StageOptions{Device: dev, Target: target, FSType: "xfs"})
	wantCode(t, err, codes.Internal)
	if want := "Filesystem must be larger than 300MB."; !strings.Contains(err.Error(), ": "+want) {
		t.Fatalf("error %q: want mkfs.xfs's reason %q", err, want)
	}
}

// TestResizeWithoutCapSysResourceNamesCause runs the real resize2fs on a
// mounted ext4 that its device outgrew, without CAP_SYS_RESOURCE (dropped
// from its bounding set by setpriv, so the test does not depend on what
// this process holds). The kernel refuses; resize2fs says so on stderr
// while its progress ("old_desc_blocks = 1, new_desc_blocks = 1") on
// stdout used to win.
func TestResizeWithoutCapSysResourceNamesCause(t *testing.T) {
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	requireTool(t, "setpriv", "util-linux")
	dev, file := loopDevice(t, 32<<20)
	ctx := context.Background()
	staging := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, staging)
	if err := mount.New(mount.Options{}).Stage(ctx, mount.StageOptions{Device: dev, Target: staging}); err != nil {
		t.Fatal(err)
	}
	growLoop(t, dev, file, 64<<20)
	real := mount.ExecRunner()
	m := newMounter(mount.RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if name == "resize2fs" {
			args = append([]string{"--bounding-set=-sys_resource", "--inh-caps=-sys_resource", name}, args...)
			name = "setpriv"
		}
		return real.Run(ctx, name, args...)
	}))
	_, err := m.Resize(ctx, mount.ResizeOptions{Device: dev, Path: staging})
	wantCode(t, err, codes.Internal)
	if want := "resize2fs: Permission denied to resize filesystem"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q: want resize2fs's reason %q", err, want)
	}
}

// TestStageFsckUncorrectableNamesCause stages an ext4 whose group
// descriptors are overwritten: fsck -a gives up with exit status 4 and says
// why on stderr, after a page of notes on stdout.
func TestStageFsckUncorrectableNamesCause(t *testing.T) {
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	dev, _ := loopDevice(t, 8<<20)
	ctx := context.Background()
	if out, err := mount.ExecRunner().Run(ctx, "mkfs.ext4", "-q", "-F", "-b", "1024", dev); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := []byte(strings.Repeat("\xff", 2048))
	if _, err := f.WriteAt(junk, 2048); err != nil { // blocks 2-3: the group descriptors
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, target)
	err = mount.New(mount.Options{}).Stage(ctx, mount.StageOptions{Device: dev, Target: target, FSType: "ext4"})
	wantCode(t, err, codes.FailedPrecondition)
	if want := "UNEXPECTED INCONSISTENCY; RUN fsck MANUALLY."; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q: want fsck's reason %q", err, want)
	}
}

// growLoop grows the file behind a loop device to size and has the kernel
// see the new size.
func growLoop(t *testing.T, dev, file string, size int64) {
	t.Helper()
	if err := os.Truncate(file, size); err != nil {
		t.Fatal(err)
	}
	if out, err := mount.ExecRunner().Run(context.Background(), "losetup", "-c", dev); err != nil {
		t.Fatalf("losetup -c %s: %v: %s", dev, err, out)
	}
}

// noCapEnv marks the child of TestResizeNamesMissingCapability, run
// without CAP_SYS_RESOURCE.
const noCapEnv = "CSIKIT_TEST_WITHOUT_SYS_RESOURCE"

// TestResizeNamesMissingCapability runs itself again without
// CAP_SYS_RESOURCE (setpriv drops it from the bounding set, so the child
// lacks it whatever this process holds). There, CanResizeOnline("ext4")
// is false while xfs's CAP_SYS_ADMIN stays, and the real resize2fs's
// failure says which capability is missing and how to grant it.
func TestResizeNamesMissingCapability(t *testing.T) {
	if os.Getenv(noCapEnv) == "" {
		requireRoot(t)
		requireTool(t, "setpriv", "util-linux")
		cmd := exec.Command("setpriv", "--bounding-set=-sys_resource", "--inh-caps=-sys_resource",
			os.Args[0], "-test.run=^TestResizeNamesMissingCapability$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), noCapEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestResizeNamesMissingCapability") {
			t.Fatalf("child without CAP_SYS_RESOURCE: %v\n%s", err, out)
		}
		return
	}
	if has, err := caps.Has(caps.SysResource); err != nil || has {
		t.Fatalf("child: Has(SysResource) = %t, %v: want false", has, err)
	}
	if mount.CanResizeOnline("ext4") || !mount.CanResizeOnline("xfs") || mount.CanResizeOnline("btrfs") {
		t.Fatalf("CanResizeOnline: ext4 %t, xfs %t, btrfs %t: want false, true, false",
			mount.CanResizeOnline("ext4"), mount.CanResizeOnline("xfs"), mount.CanResizeOnline("btrfs"))
	}
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	dev, file := loopDevice(t, 32<<20)
	ctx := context.Background()
	staging := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, staging)
	m := mount.New(mount.Options{})
	if err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: staging}); err != nil {
		t.Fatal(err)
	}
	growLoop(t, dev, file, 64<<20)
	_, err := m.Resize(ctx, mount.ResizeOptions{Device: dev, Path: staging})
	t.Logf("Resize without CAP_SYS_RESOURCE: %v", err)
	wantCode(t, err, codes.Internal)
	for _, want := range []string{"resize2fs: Permission denied to resize filesystem", "lacks CAP_SYS_RESOURCE", "add SYS_RESOURCE"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q: want it to say %q", err, want)
		}
	}
}

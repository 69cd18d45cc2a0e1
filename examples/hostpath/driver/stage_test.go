//go:build linux

package driver_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/mount"
)

// detachAtCleanup detaches whatever loop device is left on img when the
// test ends, so a failing test leaks nothing.
func detachAtCleanup(t *testing.T, img string) {
	t.Cleanup(func() {
		if dev, ok, _ := block.FindLoop(context.Background(), img); ok {
			block.DetachLoop(context.Background(), dev)
		}
	})
}

// unmountAtCleanup lazily unmounts paths at the end of the test.
func unmountAtCleanup(t *testing.T, paths ...string) {
	t.Cleanup(func() {
		for _, p := range paths {
			for unix.Unmount(p, unix.MNT_DETACH) == nil {
			}
		}
	})
}

// TestFailedStageLeavesNothing: a NodeStageVolume that fails after the
// loop device is attached (here the mount, on a flag the filesystem
// refuses) leaves no loop device, no staged marker and no mount behind: the
// CO need not call NodeUnstageVolume after a failed stage, so DeleteVolume
// must work at once, and a later correct stage must work.
func TestFailedStageLeavesNothing(t *testing.T) {
	needRoot(t)
	csitest.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
	dir := shortDir(t, "hpst")
	state := filepath.Join(dir, "state")
	s := serve(t, dir, driver.Options{StateDir: state})
	ctx := context.Background()
	for _, fsType := range []string{"ext4", "xfs"} {
		t.Run(fsType, func(t *testing.T) {
			csitest.RequireCommand(t, "mkfs."+fsType, map[string]string{"ext4": "e2fsprogs", "xfs": "xfsprogs"}[fsType])
			id := createVol(t, s, "fs-"+fsType, 300<<20, capFor(false, fsType), nil)
			img := filepath.Join(state, "images", id+".img")
			marker := filepath.Join(state, "images", id+".staged")
			staging := filepath.Join(dir, "staging-"+fsType)
			detachAtCleanup(t, img)
			unmountAtCleanup(t, staging)
			checkClean := func(when string) {
				t.Helper()
				if dev, ok, err := block.FindLoop(ctx, img); err != nil || ok {
					t.Errorf("%s: loop device %s still attached to the image (%v)", when, dev, err)
				}
				if _, err := os.Stat(marker); !os.IsNotExist(err) {
					t.Errorf("%s: staged marker left behind (%v)", when, err)
				}
				if mounted(t, staging) {
					t.Errorf("%s: %s is still mounted", when, staging)
				}
			}

			bad := &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging,
				VolumeCapability: capFor(false, fsType, "no_such_mount_option_csikit")}
			_, err := s.node.NodeStageVolume(ctx, bad)
			if err == nil {
				t.Fatal("stage with a mount flag the filesystem refuses succeeded")
			}
			if msg := err.Error(); strings.Contains(msg, ": :") || strings.HasSuffix(msg, ": ") {
				t.Errorf("error message has an empty fragment: %q", msg)
			}
			checkClean("after a failed stage")

			good := &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: capFor(false, fsType)}
			if _, err := s.node.NodeStageVolume(ctx, good); err != nil {
				t.Fatalf("a correct stage after a failed one: %v", err)
			}
			if _, err := os.Stat(marker); err != nil {
				t.Errorf("a staged volume has no marker: %v", err)
			}
			// A failing stage of a volume staged already must not tear
			// down what the first stage set up.
			other := filepath.Join(dir, "other-"+fsType)
			unmountAtCleanup(t, other)
			if _, err := s.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: other,
				VolumeCapability: bad.VolumeCapability}); err == nil {
				t.Error("a second stage with a refused mount flag succeeded")
			}
			if !mounted(t, staging) {
				t.Error("a failed second stage unmounted the staged volume")
			}
			if _, ok, _ := block.FindLoop(ctx, img); !ok {
				t.Error("a failed second stage detached the staged volume's loop device")
			}
			if _, err := os.Stat(marker); err != nil {
				t.Errorf("a failed second stage removed the staged marker: %v", err)
			}
			if err := os.WriteFile(filepath.Join(staging, "still-works"), []byte("x"), 0o600); err != nil {
				t.Errorf("writing to the staged volume after a failed second stage: %v", err)
			}
			if _, err := s.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
				t.Fatal(err)
			}
			checkClean("after unstage")

			if _, err := s.node.NodeStageVolume(ctx, bad); err == nil {
				t.Fatal("stage with a bad flag succeeded")
			}
			if _, err := s.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
				t.Errorf("DeleteVolume after a failed stage (no unstage): %v", err)
			}
			if _, err := os.Stat(img); !os.IsNotExist(err) {
				t.Errorf("image left after delete: %v", err)
			}
		})
	}
}

// mounted reports whether path is a mount point (by mountinfo).
func mounted(t *testing.T, path string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

// statfsFlags returns the ST_* flags of the mount at path.
func statfsFlags(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Flags
}

// TestDirStageChecksCapability: a directory volume's stage is a bind of its
// directory; it applies the capability's mount flags to that bind and
// refuses what it cannot serve — a flag no kernel knows or one a bind
// cannot apply (INVALID_ARGUMENT, nothing mounted), an fs_type other than
// that of the filesystem the directory lives on (INVALID_ARGUMENT when not
// staged, ALREADY_EXISTS on a repeat) — and a repeat with other flags
// answers ALREADY_EXISTS. These were all accepted (the flags dropped).
func TestDirStageChecksCapability(t *testing.T) {
	needRoot(t)
	dir := shortDir(t, "hpds")
	state := filepath.Join(dir, "state")
	s := serve(t, dir, driver.Options{StateDir: state})
	ctx := context.Background()
	id := createVol(t, s, "dir", 16<<20, capFor(false, ""), nil)
	staging := filepath.Join(dir, "staging")
	target := filepath.Join(dir, "target")
	unmountAtCleanup(t, target, staging)
	var sf unix.Statfs_t
	if err := unix.Statfs(dir, &sf); err != nil {
		t.Fatal(err)
	}
	host, ok := map[int64]string{unix.EXT4_SUPER_MAGIC: "ext4", unix.XFS_SUPER_MAGIC: "xfs", unix.TMPFS_MAGIC: "tmpfs",
		unix.BTRFS_SUPER_MAGIC: "btrfs", unix.OVERLAYFS_SUPER_MAGIC: "overlay"}[int64(sf.Type)]
	if !ok {
		t.Fatalf("the test directory %s is on a filesystem of magic %#x, which this test does not know", dir, sf.Type)
	}
	other := "xfs"
	if host == "xfs" {
		other = "ext4"
	}
	stage := func(fsType string, flags ...string) error {
		_, err := s.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging,
			VolumeCapability: capFor(false, fsType, flags...)})
		return err
	}
	wantCode := func(what string, err error, want codes.Code) {
		t.Helper()
		if status.Code(err) != want {
			t.Errorf("%s: got %v, want %v", what, err, want)
		}
	}
	for _, f := range []string{"sanity-no-such-mount-option", "sync", "dirsync", "lazytime", "size=1m"} {
		wantCode("fresh stage with mount flag "+f, stage("", "noexec", f), codes.InvalidArgument)
		if mounted(t, staging) {
			t.Fatalf("a refused stage (flag %s) left %s mounted", f, staging)
		}
	}
	wantCode("fresh stage with fs_type "+other, stage(other), codes.InvalidArgument)
	if mounted(t, staging) {
		t.Fatal("a refused stage (fs_type) left the staging path mounted")
	}
	if err := stage("", "noexec"); err != nil {
		t.Fatalf("stage with noexec: %v", err)
	}
	if statfsFlags(t, staging)&unix.ST_NOEXEC == 0 {
		t.Error("staged without noexec, want the capability's mount flags applied")
	}
	wantCode("repeat with the same capability", stage("", "noexec"), codes.OK)
	wantCode("repeat with the host filesystem's fs_type", stage(host, "noexec"), codes.OK)
	wantCode("repeat without noexec", stage(""), codes.AlreadyExists)
	wantCode("repeat with nosuid added", stage("", "noexec", "nosuid"), codes.AlreadyExists)
	wantCode("repeat with fs_type "+other, stage(other, "noexec"), codes.AlreadyExists)
	wantCode("repeat with an unknown flag", stage("", "noexec", "sanity-no-such-mount-option"), codes.InvalidArgument)
	if !mounted(t, staging) || statfsFlags(t, staging)&unix.ST_NOEXEC == 0 {
		t.Fatal("refused repeats changed the staged bind")
	}
	publish := func(target string, flags ...string) error {
		_, err := s.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging,
			TargetPath: target, VolumeCapability: capFor(false, "", flags...)})
		return err
	}
	other2 := filepath.Join(dir, "target2")
	unmountAtCleanup(t, other2)
	wantCode("publish with sync", publish(other2, "noexec", "sync"), codes.InvalidArgument)
	if mounted(t, other2) {
		t.Error("a refused publish left its target mounted")
	}
	if err := publish(target, "noexec"); err != nil {
		t.Fatalf("publish: %v", err)
	}
	if statfsFlags(t, target)&unix.ST_NOEXEC == 0 {
		t.Error("published without noexec")
	}
	if _, err := s.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	if mounted(t, staging) {
		t.Error("staging path still mounted after unstage")
	}
}

// TestXFSCloneStagesBesideSource: a clone of an xfs volume is a copy of
// its image, UUID included; xfs refuses to mount a filesystem whose UUID
// is mounted already, so the clone could not be staged on a node where
// its source is — unless staged with nouuid, as mount.Stage does.
func TestXFSCloneStagesBesideSource(t *testing.T) {
	needRoot(t)
	csitest.RequireCommand(t, "mkfs.xfs", "xfsprogs")
	dir := shortDir(t, "hpxc")
	state := filepath.Join(dir, "state")
	s := serve(t, dir, driver.Options{StateDir: state})
	ctx := context.Background()
	src := createVol(t, s, "xfs-src", 300<<20, capFor(false, "xfs"), nil)
	stagings := map[string]string{src: filepath.Join(dir, "s-src")}
	detachAtCleanup(t, filepath.Join(state, "images", src+".img"))
	unmountAtCleanup(t, stagings[src])
	if _, err := s.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: src, StagingTargetPath: stagings[src], VolumeCapability: capFor(false, "xfs")}); err != nil {
		t.Fatalf("stage the source: %v", err)
	}
	clone := createVol(t, s, "xfs-clone", 300<<20, capFor(false, "xfs"),
		&csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src}}})
	stagings[clone] = filepath.Join(dir, "s-clone")
	detachAtCleanup(t, filepath.Join(state, "images", clone+".img"))
	unmountAtCleanup(t, stagings[clone])
	if _, err := s.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: clone, StagingTargetPath: stagings[clone], VolumeCapability: capFor(false, "xfs")}); err != nil {
		t.Fatalf("stage the clone while its source is staged: %v", err)
	}
	for id, p := range stagings {
		if _, err := s.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: p}); err != nil {
			t.Errorf("unstage %s: %v", id, err)
		}
	}
}

// TestSmallFileSystemVolumes: a volume smaller than its file system's
// mkfs can format (xfs: 300 MiB with xfsprogs 6) is rounded up at
// CreateVolume when the capacity range allows and then stages; when the
// limit is below the minimum it is OutOfRange naming the minimum — never
// an Internal error at NodeStageVolume.
func TestSmallFileSystemVolumes(t *testing.T) {
	needRoot(t)
	csitest.RequireCommand(t, "mkfs.xfs", "xfsprogs")
	min, err := mount.New(mount.Options{}).MinSize(context.Background(), "xfs")
	if err != nil {
		t.Fatal(err)
	}
	if min <= 64<<20 {
		t.Fatalf("this test wants an mkfs.xfs whose minimum exceeds 64 MiB; it is %d bytes", min)
	}
	dir := shortDir(t, "hpsm")
	state := filepath.Join(dir, "state")
	s := serve(t, dir, driver.Options{StateDir: state})
	ctx := context.Background()

	_, err = s.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "too-small",
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 64 << 20, LimitBytes: 100 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{capFor(false, "xfs")}})
	if status.Code(err) != codes.OutOfRange || !strings.Contains(err.Error(), strconv.FormatInt(min, 10)) {
		t.Fatalf("CreateVolume of 64 MiB limited to 100 MiB: %v; want OutOfRange naming %d bytes", err, min)
	}

	resp, err := s.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "rounded",
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 64 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{capFor(false, "xfs")}})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetVolume().GetVolumeId()
	if got := resp.GetVolume().GetCapacityBytes(); got != min {
		t.Fatalf("capacity %d, want the xfs minimum %d", got, min)
	}
	staging := filepath.Join(dir, "s")
	detachAtCleanup(t, filepath.Join(state, "images", id+".img"))
	unmountAtCleanup(t, staging)
	if _, err := s.node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: capFor(false, "xfs")}); err != nil {
		t.Fatalf("stage the rounded-up volume: %v", err)
	}
	if _, err := s.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
}

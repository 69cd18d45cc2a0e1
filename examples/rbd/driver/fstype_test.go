//go:build linux

package driver_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/mount"
)

// fsTypeAt is the file system type mounted at path ("" if none).
func fsTypeAt(t *testing.T, path string) string {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == path {
			for i, x := range f {
				if x == "-" && i+1 < len(f) {
					return f[i+1]
				}
			}
		}
	}
	return ""
}

// TestFsTypeParameter: a StorageClass's fsType (here xfs) decides the file
// system of a mount volume whose capability names none, and a restore of
// it (same xfs UUID) stages on the same node while the source is staged
// (nouuid). An unknown fsType is InvalidArgument at create.
func TestFsTypeParameter(t *testing.T) {
	c := cephtest.Require(t)
	cephtest.RequireRoot(t)
	for _, tool := range []string{"rbd-fuse", "mkfs.xfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			cephtest.Skipf(t, "needs %s", tool)
		}
	}
	d := newDriver(t, c, driver.Options{Mapper: driver.MapperFUSE})
	ctx := context.Background()
	mount := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	create := func(name string, params map[string]string, src *csi.VolumeContentSource) (*csi.Volume, error) {
		req := &csi.CreateVolumeRequest{
			Name: name + "-" + journal.RandomID(""), VolumeCapabilities: []*csi.VolumeCapability{mount},
			Secrets: c.Secrets(), CapacityRange: &csi.CapacityRange{RequiredBytes: 320 << 20},
			Parameters: params, VolumeContentSource: src,
		}
		rctx, _ := reservedVolumeID(t, d, c, req)
		resp, err := d.CreateVolume(rctx, req)
		if err == nil {
			t.Cleanup(func() {
				_, _ = d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: c.Secrets()})
			})
		}
		return resp.GetVolume(), err
	}
	if _, err := create("fs-bogus", map[string]string{driver.ParamFsType: "btrfs"}, nil); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("CreateVolume with fsType btrfs = %v; want InvalidArgument", err)
	}
	stage := func(v *csi.Volume) string {
		staging := filepath.Join(t.TempDir(), "staging")
		if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
			VolumeId: v.GetVolumeId(), StagingTargetPath: staging, VolumeCapability: mount,
			VolumeContext: v.GetVolumeContext(), Secrets: c.Secrets(),
		}); err != nil {
			t.Fatalf("stage %s: %v", v.GetVolumeId(), err)
		}
		t.Cleanup(func() {
			if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.GetVolumeId(), StagingTargetPath: staging}); err != nil {
				t.Errorf("unstage %s: %v", v.GetVolumeId(), err)
			}
		})
		return staging
	}
	src, err := create("fs-xfs", map[string]string{driver.ParamFsType: "xfs"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	staging := stage(src)
	if got := fsTypeAt(t, staging); got != "xfs" {
		t.Fatalf("a volume of a class with fsType xfs is staged as %q", got)
	}
	if err := os.WriteFile(filepath.Join(staging, "data"), []byte("xfs"), 0o600); err != nil {
		t.Fatal(err)
	}
	snap := snapshot(t, d, c, src.GetVolumeId())
	restored, err := create("fs-xfs-restore", map[string]string{driver.ParamFsType: "xfs"},
		&csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = d.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap, Secrets: c.Secrets()})
	})
	rstaging := stage(restored) // the same UUID as the staged source
	if got := fsTypeAt(t, rstaging); got != "xfs" {
		t.Fatalf("the restore is staged as %q", got)
	}
}

// TestFsMinimumAtCreate: a mount volume smaller than its file system's
// minimum (xfs: what mkfs.xfs formats, 300 MiB with xfsprogs 6) grows to it
// at CreateVolume within the limit, and is OutOfRange naming the minimum
// when the limit is below it — not an error at NodeStageVolume. A block
// volume keeps the size asked.
func TestFsMinimumAtCreate(t *testing.T) {
	c := cephtest.Require(t)
	if _, err := exec.LookPath("mkfs.xfs"); err != nil {
		cephtest.Skipf(t, "needs mkfs.xfs")
	}
	d := newDriver(t, c, driver.Options{Mapper: driver.MapperFUSE})
	ctx := context.Background()
	mountCap := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "xfs"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	blockCap := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	create := func(name string, vc *csi.VolumeCapability, cr *csi.CapacityRange) (*csi.Volume, error) {
		req := &csi.CreateVolumeRequest{
			Name: name + "-" + journal.RandomID(""), VolumeCapabilities: []*csi.VolumeCapability{vc},
			Secrets: c.Secrets(), CapacityRange: cr,
		}
		rctx, _ := reservedVolumeID(t, d, c, req)
		resp, err := d.CreateVolume(rctx, req)
		if err == nil {
			t.Cleanup(func() {
				_, _ = d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: c.Secrets()})
			})
		}
		return resp.GetVolume(), err
	}
	v, err := create("xfs-small", mountCap, &csi.CapacityRange{RequiredBytes: 16 << 20})
	if err != nil {
		t.Fatalf("a 16 MiB xfs volume: %v; want it grown to xfs's minimum", err)
	}
	if v.GetCapacityBytes() < 300<<20 {
		t.Errorf("a 16 MiB xfs volume has %d bytes; want at least xfs's 300 MiB", v.GetCapacityBytes())
	}
	_, err = create("xfs-capped", mountCap, &csi.CapacityRange{RequiredBytes: 16 << 20, LimitBytes: 64 << 20})
	if status.Code(err) != codes.OutOfRange || !strings.Contains(err.Error(), "xfs") {
		t.Errorf("a 16–64 MiB xfs volume: %v; want OutOfRange naming xfs's minimum", err)
	}
	b, err := create("block-small", blockCap, &csi.CapacityRange{RequiredBytes: 16 << 20})
	if err != nil || b.GetCapacityBytes() != 16<<20 {
		t.Errorf("a 16 MiB block volume: %d bytes, %v; want 16 MiB", b.GetCapacityBytes(), err)
	}
}

// TestStageFormatsWithoutDiscard: a blank image is formatted without the
// discard pass mkfs makes by default. A new RBD image is unallocated, so
// the pass frees nothing, and through a mapper it costs a request per
// object: under rbd-nbd (librbd behind /dev/nbdN) it made an xfs stage
// take 34 s in the VM lane, past sanity's call bound.
func TestStageFormatsWithoutDiscard(t *testing.T) {
	c := cephtest.Require(t)
	cephtest.RequireRoot(t)
	for _, tool := range []string{"rbd-fuse", "mkfs.xfs", "mkfs.ext4"} {
		if _, err := exec.LookPath(tool); err != nil {
			cephtest.Skipf(t, "needs %s", tool)
		}
	}
	var mu sync.Mutex
	var mkfs [][]string
	exe := mount.ExecRunner()
	d := newDriver(t, c, driver.Options{Mapper: driver.MapperFUSE, Runner: mount.RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if strings.HasPrefix(name, "mkfs.") {
			mu.Lock()
			mkfs = append(mkfs, append([]string{name}, args...))
			mu.Unlock()
		}
		return exe.Run(ctx, name, args...)
	})})
	ctx := context.Background()
	for _, tc := range []struct{ fs, flag string }{{"ext4", "nodiscard"}, {"xfs", "-K"}} {
		vc := &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: tc.fs}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}
		req := &csi.CreateVolumeRequest{
			Name: "nodiscard-" + tc.fs + "-" + journal.RandomID(""), VolumeCapabilities: []*csi.VolumeCapability{vc},
			Secrets: c.Secrets(), CapacityRange: &csi.CapacityRange{RequiredBytes: 320 << 20},
		}
		rctx, _ := reservedVolumeID(t, d, c, req)
		resp, err := d.CreateVolume(rctx, req)
		if err != nil {
			t.Fatal(err)
		}
		v := resp.GetVolume()
		staging := filepath.Join(t.TempDir(), "staging")
		if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: v.GetVolumeId(), StagingTargetPath: staging,
			VolumeCapability: vc, VolumeContext: v.GetVolumeContext(), Secrets: c.Secrets()}); err != nil {
			t.Fatalf("stage %s: %v", tc.fs, err)
		}
		if got := fsTypeAt(t, staging); got != tc.fs {
			t.Errorf("staged as %q, want %s", got, tc.fs)
		}
		if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.GetVolumeId(), StagingTargetPath: staging}); err != nil {
			t.Fatalf("unstage: %v", err)
		}
		if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v.GetVolumeId(), Secrets: c.Secrets()}); err != nil {
			t.Fatalf("delete: %v", err)
		}
		mu.Lock()
		var call []string
		for _, m := range mkfs {
			if m[0] == "mkfs."+tc.fs {
				call = m
			}
		}
		mu.Unlock()
		if call == nil {
			t.Fatalf("staging a blank %s volume ran no mkfs.%s", tc.fs, tc.fs)
		}
		if !strings.Contains(strings.Join(call, " "), tc.flag) {
			t.Errorf("%q: want %s (no discard pass over a new, unallocated image)", call, tc.flag)
		}
	}
}

// TestStageGrowsExpandedExt4: an ext4 volume expanded while it was not
// staged (ControllerExpandVolume between two pods, as Kubernetes' e2e
// "volume-expand ... re-created on the same node after controller resize
// is finished" does) is staged with a file system that fills the grown
// image, its data kept, so kubelet's NodeExpandVolume after the stage has
// nothing left to grow online (which needs CAP_SYS_RESOURCE).
func TestStageGrowsExpandedExt4(t *testing.T) {
	c := cephtest.Require(t)
	cephtest.RequireRoot(t)
	for _, tool := range []string{"rbd-fuse", "mkfs.ext4", "resize2fs", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			cephtest.Skipf(t, "needs %s", tool)
		}
	}
	d := newDriver(t, c, driver.Options{Mapper: driver.MapperFUSE})
	ctx := context.Background()
	capab := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	req := &csi.CreateVolumeRequest{
		Name: "grow-" + journal.RandomID(""), VolumeCapabilities: []*csi.VolumeCapability{capab},
		Secrets: c.Secrets(), CapacityRange: &csi.CapacityRange{RequiredBytes: 64 << 20},
	}
	rctx, _ := reservedVolumeID(t, d, c, req)
	resp, err := d.CreateVolume(rctx, req)
	if err != nil {
		t.Fatal(err)
	}
	vol := resp.GetVolume()
	t.Cleanup(func() {
		_, _ = d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol.GetVolumeId(), Secrets: c.Secrets()})
	})
	staging := filepath.Join(t.TempDir(), "staging")
	stage := func() int64 {
		t.Helper()
		if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
			VolumeId: vol.GetVolumeId(), StagingTargetPath: staging, VolumeCapability: capab,
			VolumeContext: vol.GetVolumeContext(), Secrets: c.Secrets(),
		}); err != nil {
			t.Fatalf("stage: %v", err)
		}
		var sfs unix.Statfs_t
		if err := unix.Statfs(staging, &sfs); err != nil {
			t.Fatal(err)
		}
		return int64(sfs.Blocks) * sfs.Bsize
	}
	unstage := func() {
		t.Helper()
		if _, err := d.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging}); err != nil {
			t.Fatalf("unstage: %v", err)
		}
	}
	before := stage()
	if err := os.WriteFile(filepath.Join(staging, "data"), []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	unstage()
	exp, err := d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: vol.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 128 << 20},
		VolumeCapability: capab, Secrets: c.Secrets(),
	})
	if err != nil || !exp.GetNodeExpansionRequired() {
		t.Fatalf("ControllerExpandVolume: %v, %v; want the node step asked for", exp, err)
	}
	after := stage()
	defer unstage()
	if after < before+(64<<20)*9/10 {
		t.Errorf("file system staged after ControllerExpandVolume: %d bytes, %d before; want about 64 MiB more", after, before)
	}
	if b, err := os.ReadFile(filepath.Join(staging, "data")); err != nil || string(b) != "precious" {
		t.Errorf("data after the grown stage: %q, %v", b, err)
	}
}

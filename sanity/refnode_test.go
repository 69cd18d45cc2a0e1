//go:build linux

package sanity_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
)

// The node service of the reference driver: mount volumes are bind mounts
// of the volume's data directory (staging, then target); block volumes are
// loop devices bound onto the target file.

// stageRecord is what the staged mark holds: where and how the volume is
// staged, so that a repeat can be compared with the first call.
type stageRecord struct {
	Path   string   `json:"path"`
	FsType string   `json:"fs_type"`
	Flags  []string `json:"flags"`
}

// refFlags maps the mount flags the reference driver serves (bind mounts
// take only per-mount flags) to their MS_ bits.
var refFlags = map[string]uintptr{"noexec": unix.MS_NOEXEC, "nosuid": unix.MS_NOSUID, "nodev": unix.MS_NODEV, "noatime": unix.MS_NOATIME}

// mountBits returns the MS_ bits of flags, or InvalidArgument for a flag
// the driver does not know (as the kernel refuses an unknown option).
func mountBits(flags []string) (uintptr, error) {
	var bits uintptr
	for _, f := range flags {
		b, ok := refFlags[f]
		if !ok {
			return 0, status.Errorf(codes.InvalidArgument, "mount flag %q: unknown (this driver takes noexec, nosuid, nodev, noatime)", f)
		}
		bits |= b
	}
	return bits, nil
}

// bind bind-mounts src onto dst with flags, read-only if ro.
func bind(src, dst string, bits uintptr, ro bool) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return status.Errorf(codes.Internal, "bind mount: %v", err)
	}
	if ro {
		bits |= unix.MS_RDONLY
	}
	if bits != 0 {
		if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|bits, ""); err != nil {
			_ = unix.Unmount(dst, 0)
			return status.Errorf(codes.Internal, "remount with flags: %v", err)
		}
	}
	return nil
}

// sameFile reports whether a and b are the same directory (device and
// inode): a bind mount's root is the directory it binds.
func sameFile(a, b string) bool {
	var sa, sb unix.Stat_t
	return unix.Stat(a, &sa) == nil && unix.Stat(b, &sb) == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

func sameFlags(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// refuseUnserved is what a driver serving fewer filesystems or mount flags
// does first, before looking at what is staged or published: the variant
// "own_fs_only" (a driver with a filesystem of its own, as a tmpfs-only
// one) refuses every fs_type but "" and "reffs", the variant "no_noexec"
// refuses the noexec flag — both with INVALID_ARGUMENT, on a fresh call and
// on a repeat alike. Neither is a fault: the harness must pass them.
func (d *refDriver) refuseUnserved(mc *csi.VolumeCapability_MountVolume) error {
	if fs := mc.GetFsType(); d.fault == "own_fs_only" && fs != "" && fs != "reffs" {
		return status.Errorf(codes.InvalidArgument, "fs_type %q: this driver serves only reffs", fs)
	}
	if d.fault == "no_noexec" && slices.Contains(mc.GetMountFlags(), "noexec") {
		return status.Error(codes.InvalidArgument, "mount flag noexec: this driver does not serve it")
	}
	return nil
}

func (d *refDriver) NodeStageVolume(ctx context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	m, err := d.volume(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if m.Block != (r.GetVolumeCapability().GetBlock() != nil) {
		return nil, status.Errorf(codes.InvalidArgument, "volume is block=%v", m.Block)
	}
	mc := r.GetVolumeCapability().GetMount()
	if err := d.refuseUnserved(mc); err != nil {
		return nil, err
	}
	rec := stageRecord{Path: r.GetStagingTargetPath(), FsType: mc.GetFsType(), Flags: mc.GetMountFlags()}
	writeRec := func() error {
		b, _ := json.Marshal(rec)
		if err := os.WriteFile(d.stagedMark(r.GetVolumeId()), b, 0o640); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		return nil
	}
	if m.Block {
		if err := writeRec(); err != nil {
			return nil, err
		}
		if _, ok, err := block.FindLoop(ctx, d.img(r.GetVolumeId())); err != nil || ok {
			return &csi.NodeStageVolumeResponse{}, err
		}
		_, err := block.AttachLoop(ctx, d.img(r.GetVolumeId()), block.LoopOptions{})
		return &csi.NodeStageVolumeResponse{}, err
	}
	data := filepath.Join(d.volDir(r.GetVolumeId()), "data")
	if ok, _ := mountedAt(r.GetStagingTargetPath()); ok {
		if !sameFile(r.GetStagingTargetPath(), data) {
			if d.fault == "stage_path_reuse" {
				return &csi.NodeStageVolumeResponse{}, nil
			}
			return nil, status.Errorf(codes.FailedPrecondition, "staging path holds another volume")
		}
		var old stageRecord
		b, _ := os.ReadFile(d.stagedMark(r.GetVolumeId()))
		_ = json.Unmarshal(b, &old)
		if old.FsType != rec.FsType && d.fault != "restage_ignores_fs_type" {
			return nil, status.Errorf(codes.AlreadyExists, "staged with fs_type %q", old.FsType)
		}
		if !sameFlags(old.Flags, rec.Flags) && d.fault != "restage_ignores_flags" {
			return nil, status.Errorf(codes.AlreadyExists, "staged with mount flags %v", old.Flags)
		}
		return &csi.NodeStageVolumeResponse{}, nil
	}
	if d.fault == "stage_residue" {
		// Mounts first and checks the flags after, leaving the mount
		// and the staged mark behind when they are wrong.
		if err := writeRec(); err != nil {
			return nil, err
		}
		if err := bind(data, r.GetStagingTargetPath(), 0, false); err != nil {
			return nil, err
		}
		bits, err := mountBits(rec.Flags)
		if err != nil {
			return nil, err
		}
		if bits != 0 {
			if err := unix.Mount("", r.GetStagingTargetPath(), "", unix.MS_BIND|unix.MS_REMOUNT|bits, ""); err != nil {
				return nil, status.Errorf(codes.Internal, "remount with flags: %v", err)
			}
		}
		return &csi.NodeStageVolumeResponse{}, nil
	}
	bits, err := mountBits(rec.Flags)
	if err != nil {
		return nil, err
	}
	if err := writeRec(); err != nil {
		return nil, err
	}
	if err := bind(data, r.GetStagingTargetPath(), bits, false); err != nil {
		os.Remove(d.stagedMark(r.GetVolumeId()))
		return nil, err
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (d *refDriver) NodeUnstageVolume(ctx context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if m, err := d.volume(r.GetVolumeId()); err == nil {
		defer os.Remove(d.stagedMark(r.GetVolumeId()))
		if m.Block {
			dev, ok, err := block.FindLoop(ctx, d.img(r.GetVolumeId()))
			if err != nil || !ok {
				return &csi.NodeUnstageVolumeResponse{}, err
			}
			return &csi.NodeUnstageVolumeResponse{}, block.DetachLoop(ctx, dev)
		}
	}
	if ok, _ := mountedAt(r.GetStagingTargetPath()); ok {
		if err := unix.Unmount(r.GetStagingTargetPath(), 0); err != nil {
			return nil, status.Errorf(codes.Internal, "unmount: %v", err)
		}
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// pubRecord is the file recording the mount flags of the volume's
// publish at target.
func (d *refDriver) pubRecord(id, target string) string {
	h := sha256.Sum256([]byte(target))
	return filepath.Join(d.volDir(id), "pub-"+hex.EncodeToString(h[:8]))
}

func (d *refDriver) NodePublishVolume(ctx context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	m, err := d.volume(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := d.refuseUnserved(r.GetVolumeCapability().GetMount()); err != nil {
		return nil, err
	}
	flags := r.GetVolumeCapability().GetMount().GetMountFlags()
	if ok, ro := mountedAt(r.GetTargetPath()); ok {
		if ro != r.GetReadonly() {
			return nil, status.Errorf(codes.AlreadyExists, "published at the target with readonly=%v", ro)
		}
		var old []string
		b, _ := os.ReadFile(d.pubRecord(r.GetVolumeId(), r.GetTargetPath()))
		_ = json.Unmarshal(b, &old)
		if !sameFlags(old, flags) && d.fault != "republish_ignores_flags" {
			return nil, status.Errorf(codes.AlreadyExists, "published at the target with mount flags %v", old)
		}
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if m.Block {
		dev, ok, err := block.FindLoop(ctx, d.img(r.GetVolumeId()))
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, status.Errorf(codes.FailedPrecondition, "volume is not staged")
		}
		return &csi.NodePublishVolumeResponse{}, block.MountBlock(ctx, block.MountOptions{Device: dev, Target: r.GetTargetPath(), ReadOnly: r.GetReadonly()})
	}
	if ok, _ := mountedAt(r.GetStagingTargetPath()); !ok && d.fault != "publish_unstaged_dir" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume is not staged at the staging path")
	}
	bits, err := mountBits(flags)
	if err != nil {
		return nil, err
	}
	if d.fault == "lost_data" {
		es, _ := os.ReadDir(r.GetStagingTargetPath())
		for _, e := range es {
			os.RemoveAll(filepath.Join(r.GetStagingTargetPath(), e.Name()))
		}
	}
	if err := os.Mkdir(r.GetTargetPath(), 0o750); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, status.Errorf(codes.Internal, "mkdir target: %v", err)
	}
	b, _ := json.Marshal(flags)
	if err := os.WriteFile(d.pubRecord(r.GetVolumeId(), r.GetTargetPath()), b, 0o640); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := bind(r.GetStagingTargetPath(), r.GetTargetPath(), bits, r.GetReadonly() && d.fault != "ignores_readonly"); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *refDriver) NodeUnpublishVolume(_ context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if d.fault == "leaked_mount" {
		return &csi.NodeUnpublishVolumeResponse{}, nil
	}
	if ok, _ := mountedAt(r.GetTargetPath()); ok {
		if err := unix.Unmount(r.GetTargetPath(), 0); err != nil {
			return nil, status.Errorf(codes.Internal, "unmount: %v", err)
		}
	}
	if safe(r.GetVolumeId()) {
		_ = os.Remove(d.pubRecord(r.GetVolumeId(), r.GetTargetPath()))
	}
	if err := os.Remove(r.GetTargetPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "removing target: %v", err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (d *refDriver) NodeGetVolumeStats(_ context.Context, r *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	m, err := d.volume(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if ok, _ := mountedAt(r.GetVolumePath()); !ok {
		return nil, status.Errorf(codes.NotFound, "volume is not published at the path")
	}
	if m.Block {
		dev := r.GetVolumePath()
		if d.fault == "stats_wrong_device" {
			dev = "/dev" // the filesystem holding the device node, not the device
		}
		size, err := sizeOf(dev)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "measuring %s: %v", dev, err)
		}
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: size}}}, nil
	}
	var used int64
	_ = filepath.WalkDir(filepath.Join(d.volDir(r.GetVolumeId()), "data"), func(_ string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, err := e.Info(); err == nil {
				used += fi.Size()
			}
		}
		return nil
	})
	// A volume is a directory of the filesystem its path is on: that
	// filesystem's size is the volume's.
	var st unix.Statfs_t
	if err := unix.Statfs(r.GetVolumePath(), &st); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs: %v", err)
	}
	total, avail := int64(st.Blocks)*st.Bsize, int64(st.Bavail)*st.Bsize
	if d.fault == "stats_requested_size" {
		total = m.Capacity
	}
	if d.fault == "stats_frozen_used" {
		used = 0
	}
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: total, Used: used, Available: max(min(avail, total-used), 0)}}}, nil
}

// sizeOf is the size of a block device (BLKGETSIZE64), or of the
// filesystem at a directory.
func sizeOf(path string) (int64, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	if fi.Mode()&os.ModeDevice == 0 {
		var st unix.Statfs_t
		if err := unix.Statfs(path, &st); err != nil {
			return 0, err
		}
		return int64(st.Blocks) * st.Bsize, nil
	}
	return block.DeviceSize(path)
}

// mountedAt reports whether path is a mount point and whether it is
// read-only.
func mountedAt(path string) (mounted, readonly bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 5 && fs[4] == path {
			mounted = true
			readonly = strings.HasPrefix(fs[5], "ro")
		}
	}
	return mounted, readonly
}

// copyFile copies a file.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyDir copies the regular files of src into dst.
func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o750); err != nil {
		return err
	}
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if e.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o750)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o640)
	})
}

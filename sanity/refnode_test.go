//go:build linux

package sanity_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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

func (d *refDriver) NodeStageVolume(ctx context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	m, err := d.volume(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if m.Block != (r.GetVolumeCapability().GetBlock() != nil) {
		return nil, status.Errorf(codes.InvalidArgument, "volume is block=%v", m.Block)
	}
	if err := os.WriteFile(d.stagedMark(r.GetVolumeId()), nil, 0o640); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if m.Block {
		if _, ok, err := block.FindLoop(ctx, d.img(r.GetVolumeId())); err != nil || ok {
			return &csi.NodeStageVolumeResponse{}, err
		}
		_, err := block.AttachLoop(ctx, d.img(r.GetVolumeId()), block.LoopOptions{})
		return &csi.NodeStageVolumeResponse{}, err
	}
	if ok, _ := mountedAt(r.GetStagingTargetPath()); ok {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	data := filepath.Join(d.volDir(r.GetVolumeId()), "data")
	if err := unix.Mount(data, r.GetStagingTargetPath(), "", unix.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind mount: %v", err)
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

func (d *refDriver) NodePublishVolume(ctx context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	m, err := d.volume(r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if ok, ro := mountedAt(r.GetTargetPath()); ok {
		if ro != r.GetReadonly() {
			return nil, status.Errorf(codes.AlreadyExists, "published at the target with readonly=%v", ro)
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
	if ok, _ := mountedAt(r.GetStagingTargetPath()); !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "volume is not staged at the staging path")
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
	if err := unix.Mount(r.GetStagingTargetPath(), r.GetTargetPath(), "", unix.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind mount: %v", err)
	}
	if r.GetReadonly() && d.fault != "ignores_readonly" {
		if err := unix.Mount("", r.GetTargetPath(), "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			_ = unix.Unmount(r.GetTargetPath(), 0)
			return nil, status.Errorf(codes.Internal, "remount read-only: %v", err)
		}
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
	var used int64
	_ = filepath.WalkDir(filepath.Join(d.volDir(r.GetVolumeId()), "data"), func(_ string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if fi, err := e.Info(); err == nil {
				used += fi.Size()
			}
		}
		return nil
	})
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: m.Capacity, Used: used, Available: max(m.Capacity-used, 0)}}}, nil
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

//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/capacity"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/stats"
)

// topologyKey pins each volume to the node whose memory holds it.
const topologyKey = "tmpfs.csikit.dev/node"

// driver keeps each volume as a size-limited tmpfs mounted at
// <dir>/<id> from CreateVolume to DeleteVolume; NodePublishVolume
// bind-mounts it into the pod. Sizes live in the journal's KV, so a
// restarted driver knows its volumes. Memory does not survive a reboot:
// publishing a volume whose tmpfs is gone fails instead of handing the pod
// an empty one.
type driver struct {
	dir    string // volumes are mounted below it
	nodeID string
	sizes  *journal.KV // volume ID -> size in bytes (decimal)
	m      mount.Interface
	sizing capacity.Options
}

func (d *driver) path(id string) string { return filepath.Join(d.dir, id) }

// size returns a known volume's size; NotFound for any other ID, so an
// untrusted ID never reaches a path unless the journal holds it.
func (d *driver) size(ctx context.Context, id string) (int64, error) {
	v, ok, err := d.sizes.Get(ctx, id)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, status.Errorf(codes.NotFound, "volume %q does not exist", id)
	}
	return strconv.ParseInt(string(v), 10, 64)
}

// mountTmpfs mounts (or, with remount, resizes) the volume's tmpfs.
func (d *driver) mountTmpfs(id string, size int64, remount bool) error {
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if remount {
		flags |= unix.MS_REMOUNT
	}
	if err := unix.Mount("tmpfs", d.path(id), "tmpfs", flags, fmt.Sprintf("size=%d,mode=0777", size)); err != nil {
		return status.Errorf(codes.Internal, "mount a %d-byte tmpfs for volume %s: %v", size, id, err)
	}
	return nil
}

func (d *driver) mounted(id string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(d.path(id), &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	if err := unix.Lstat(d.dir, &parent); err != nil {
		return false, err
	}
	return st.Dev != parent.Dev, nil
}

// checkFSType refuses a capability naming a filesystem other than tmpfs:
// this driver has no other, and a volume asked for xfs must not be handed
// out as tmpfs (INVALID_ARGUMENT, the spec's answer to a capability the
// plugin does not support).
func checkFSType(caps ...*csi.VolumeCapability) error {
	for _, c := range caps {
		if fs := c.GetMount().GetFsType(); fs != "" && fs != "tmpfs" {
			return status.Errorf(codes.InvalidArgument, "fs_type %q is not supported: volumes of this driver are tmpfs (leave fsType empty or set it to tmpfs)", fs)
		}
	}
	return nil
}

func (d *driver) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := checkFSType(r.GetVolumeCapabilities()...); err != nil {
		return nil, err
	}
	id, err := journal.RequireReservedID(ctx)
	if err != nil {
		return nil, err
	}
	size, err := capacity.Size(r.GetCapacityRange(), d.sizing)
	if err != nil {
		return nil, err
	}
	// A retry after a crash may find the tmpfs already there.
	if err := os.Mkdir(d.path(id), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, status.Errorf(codes.Internal, "create volume directory: %v", err)
	}
	if ok, err := d.mounted(id); err != nil {
		return nil, status.Errorf(codes.Internal, "check volume %s: %v", id, err)
	} else if !ok {
		if err := d.mountTmpfs(id, size, false); err != nil {
			return nil, err
		}
	}
	if err := d.sizes.DeferPut(ctx, id, []byte(strconv.FormatInt(size, 10))); err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{
		VolumeId: id, CapacityBytes: size,
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{topologyKey: d.nodeID}}},
	}}, nil
}

func (d *driver) DeleteVolume(ctx context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if _, err := d.size(ctx, r.GetVolumeId()); status.Code(err) == codes.NotFound {
		return &csi.DeleteVolumeResponse{}, nil // already gone: success, as the spec asks
	} else if err != nil {
		return nil, err
	}
	p := d.path(r.GetVolumeId())
	if err := unix.Unmount(p, unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return nil, status.Errorf(codes.Internal, "unmount volume %s: %v", r.GetVolumeId(), err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "remove volume directory: %v", err)
	}
	return &csi.DeleteVolumeResponse{}, d.sizes.DeferDelete(ctx, r.GetVolumeId())
}

// LookupVolume lets csikit answer ValidateVolumeCapabilities.
func (d *driver) LookupVolume(ctx context.Context, id string) error {
	_, err := d.size(ctx, id)
	return err
}

func (d *driver) ControllerExpandVolume(ctx context.Context, r *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	cur, err := d.size(ctx, r.GetVolumeId())
	if err != nil {
		return nil, err
	}
	size, err := capacity.Expand(r.GetCapacityRange(), cur, d.sizing)
	if err != nil || size == cur {
		return &csi.ControllerExpandVolumeResponse{CapacityBytes: size}, err
	}
	if ok, err := d.mounted(r.GetVolumeId()); err != nil || !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s lost its memory (node rebooted?): %v", r.GetVolumeId(), err)
	}
	if err := d.mountTmpfs(r.GetVolumeId(), size, true); err != nil {
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: size},
		d.sizes.Put(ctx, r.GetVolumeId(), []byte(strconv.FormatInt(size, 10)))
}

func (d *driver) NodePublishVolume(ctx context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if _, err := d.size(ctx, r.GetVolumeId()); err != nil {
		return nil, err
	}
	if err := checkFSType(r.GetVolumeCapability()); err != nil {
		return nil, err
	}
	if ok, err := d.mounted(r.GetVolumeId()); err != nil || !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s lost its memory (node rebooted?); delete it: %v", r.GetVolumeId(), err)
	}
	return &csi.NodePublishVolumeResponse{}, d.m.Publish(ctx, mount.PublishOptions{
		Source: d.path(r.GetVolumeId()), Target: r.GetTargetPath(), ReadOnly: r.GetReadonly(),
		MountFlags: r.GetVolumeCapability().GetMount().GetMountFlags(),
	})
}

func (d *driver) NodeUnpublishVolume(ctx context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	return &csi.NodeUnpublishVolumeResponse{}, d.m.Unpublish(ctx, r.GetTargetPath(), mount.UnmountOptions{})
}

func (d *driver) NodeGetVolumeStats(ctx context.Context, r *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if _, err := d.size(ctx, r.GetVolumeId()); err != nil {
		return nil, err
	}
	return stats.VolumeStats(ctx, r.GetVolumePath())
}

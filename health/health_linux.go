//go:build linux

package health

import (
	"errors"
	"fmt"
	"os"

	"github.com/csikit/csikit/internal/pathstat"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/block"
	"golang.org/x/sys/unix"
)

type entry = csi.VolumeHealth_VolumeHealthEntry

// pathHealth runs checks on path. Messages start with the path, so the
// caller can prefix the request field name.
func pathHealth(path string, checks Check) ([]*entry, error) {
	var stx unix.Statx_t
	if err := pathstat.Statx(path, unix.STATX_TYPE|unix.STATX_MNT_ID, &stx); err != nil {
		if checks&CheckExists == 0 {
			return nil, nil
		}
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return []*entry{Inaccessible(ReasonPathMissing, fmt.Sprintf("%q does not exist", path))}, nil
		}
		return []*entry{Inaccessible(ReasonPathError, fmt.Sprintf("%q cannot be examined: %v", path, err))}, nil
	}
	switch uint32(stx.Mode) & unix.S_IFMT {
	case unix.S_IFBLK:
		return blockHealth(path, checks), nil
	case unix.S_IFDIR:
		return dirHealth(path, &stx, checks)
	default:
		if checks&CheckMounted == 0 {
			return nil, nil
		}
		return []*entry{Inaccessible(ReasonNotMounted, fmt.Sprintf("%q is a file (mode %#o) with no block device bound on it", path, stx.Mode&unix.S_IFMT))}, nil
	}
}

// blockHealth checks a raw block volume's device node.
func blockHealth(path string, checks Check) []*entry {
	if checks&CheckDevice == 0 {
		return nil
	}
	size, err := block.DeviceSize(path)
	switch {
	case err != nil && pathstat.DeviceGone(err):
		return []*entry{Inaccessible(ReasonDeviceGone, fmt.Sprintf("%q: the block device is gone: %v", path, err))}
	case err != nil:
		return []*entry{Inaccessible(ReasonPathError, fmt.Sprintf("%q: reading the block device: %v", path, err))}
	case size == 0:
		return []*entry{Inaccessible(ReasonDeviceGone, fmt.Sprintf("%q: the block device has size 0 (its backing store is detached)", path))}
	}
	return nil
}

// dirHealth checks a filesystem volume's mount point.
func dirHealth(path string, stx *unix.Statx_t, checks Check) ([]*entry, error) {
	mounted, err := pathstat.IsMountRoot(path, stx)
	if err != nil {
		return nil, fmt.Errorf("checking %q for a mount point: %w", path, err)
	}
	if !mounted {
		if checks&CheckMounted != 0 {
			return []*entry{Inaccessible(ReasonNotMounted, fmt.Sprintf("%q is not a mount point", path))}, nil
		}
		return nil, nil // the other checks would describe the filesystem underneath
	}
	var out []*entry
	if checks&CheckDevice != 0 && stx.Dev_major != 0 {
		if gone, err := sysDeviceGone(stx.Dev_major, stx.Dev_minor); err == nil && gone {
			out = append(out, Inaccessible(ReasonDeviceGone, fmt.Sprintf("%q: its device %d:%d is gone", path, stx.Dev_major, stx.Dev_minor)))
		}
	}
	if checks&(CheckExists|CheckDevice) != 0 {
		var st unix.Statfs_t
		if err := unix.Statfs(path, &st); err != nil { // e.g. EIO from a shut-down XFS
			return append(out, Inaccessible(ReasonPathError, fmt.Sprintf("%q: statfs: %v", path, err))), nil
		}
	}
	if checks&CheckWritable != 0 {
		ro, err := superblockReadOnly(path, stx)
		if err != nil {
			return nil, err
		}
		if ro {
			out = append(out, Degraded(ReasonFilesystemReadOnly, fmt.Sprintf("%q: the filesystem was remounted read-only under a read-write mount (errors=remount-ro after an I/O error or corruption?)", path)))
		}
	}
	return out, nil
}

// sysDeviceGone reports whether block device major:minor is missing from
// /sys/dev/block. Without sysfs it cannot tell and returns an error.
func sysDeviceGone(major, minor uint32) (bool, error) {
	if _, err := os.Stat("/sys/dev/block"); err != nil {
		return false, err
	}
	_, err := os.Stat(fmt.Sprintf("/sys/dev/block/%d:%d", major, minor))
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	return false, err
}

// superblockReadOnly reports whether the kernel turned path's filesystem
// read-only behind a read-write mount: the superblock is "ro" under an "rw"
// mount, or ext4 flagged it "emergency_ro" (Linux 6.x no longer flips the
// superblock). Both show only in mountinfo, which is read once per call.
func superblockReadOnly(path string, stx *unix.Statx_t) (bool, error) {
	match := func(m pathstat.MountEntry) bool { return m.MountPoint == path }
	if stx.Mask&unix.STATX_MNT_ID != 0 {
		id := stx.Mnt_id
		match = func(m pathstat.MountEntry) bool { return m.ID == id }
	}
	m, found, err := pathstat.FindMount(match)
	if err != nil {
		return false, fmt.Errorf("reading mountinfo for %q: %w", path, err)
	}
	if !found || !pathstat.HasOption(m.MountOpts, "rw") {
		return false, nil // read-only on purpose, or not ours to judge
	}
	return pathstat.HasOption(m.SuperOpts, "ro") || pathstat.HasOption(m.SuperOpts, "emergency_ro"), nil
}

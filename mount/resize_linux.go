//go:build linux

package mount

import (
	"context"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// Resize grows the file system on o.Device, mounted at o.Path, online to
// the size of the device: resize2fs for ext2/3/4, xfs_growfs for xfs. It
// reports whether the file system grew, measured with statfs before and
// after, so a retry after a completed resize reports false. o.Path must be
// a mount of o.Device (codes.FailedPrecondition otherwise); other file
// systems give codes.InvalidArgument. The kernel grows a mounted file system
// only for a process with the right capability (see CanResizeOnline); when
// this process lacks it, a failure's message names it.
func (m *Mounter) Resize(ctx context.Context, o ResizeOptions) (bool, error) {
	if err := checkPath("device", o.Device); err != nil {
		return false, err
	}
	if err := checkPath("mount path", o.Path); err != nil {
		return false, err
	}
	isBlock, rdev, err := inspectDevice(o.Device)
	if err != nil {
		return false, err
	}
	if isBlock && o.Encryption != nil {
		if o.Device, err = m.ResizeEncrypted(ctx, *o.Encryption); err != nil {
			return false, err
		}
		if isBlock, rdev, err = inspectDevice(o.Device); err != nil {
			return false, err
		}
	}
	if !isBlock {
		return false, errorf(codes.InvalidArgument, nil, "%s is not a block device", o.Device)
	}
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, o.Path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE, &stx); err != nil {
		return false, errorf(codes.FailedPrecondition, err, "mount path %s", o.Path)
	}
	if stx.Dev_major != unix.Major(rdev) || stx.Dev_minor != unix.Minor(rdev) {
		return false, errorf(codes.FailedPrecondition, nil, "%s is not a mount of %s", o.Path, o.Device)
	}
	format, err := m.DiskFormat(ctx, o.Device)
	if err != nil {
		return false, err
	}
	var name string
	var args []string
	switch format {
	case "ext2", "ext3", "ext4":
		name, args = "resize2fs", []string{o.Device}
	case "xfs":
		name, args = "xfs_growfs", []string{"-d", o.Path}
	default:
		return false, errorf(codes.InvalidArgument, nil, "online resize of %q on %s is not supported", format, o.Device)
	}
	before, err := fsBytes(o.Path)
	if err != nil {
		return false, err
	}
	if out, err := m.run.Run(ctx, name, args...); err != nil {
		if ctx.Err() != nil {
			return false, ctxError(ctx.Err(), "resize %s", o.Device)
		}
		return false, errorf(codes.Internal, err, "resize %s at %s%s%s", o.Device, o.Path, outputSuffix(out, err), missingCapability(format))
	}
	after, err := fsBytes(o.Path)
	if err != nil {
		return false, err
	}
	if after > before {
		m.log.InfoContext(ctx, "resized", "device", o.Device, "path", o.Path, "from", before, "to", after)
	}
	return after > before, nil
}

func fsBytes(path string) (uint64, error) {
	var sfs unix.Statfs_t
	if err := unix.Statfs(path, &sfs); err != nil {
		return 0, errorf(codes.Internal, err, "statfs %s", path)
	}
	return sfs.Blocks * uint64(sfs.Bsize), nil
}

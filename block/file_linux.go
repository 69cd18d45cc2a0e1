//go:build linux

package block

import (
	"context"
	"errors"
	"github.com/csikit/csikit/internal/mountpoint"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// maxStacked bounds how many mounts stacked on one target UnmountBlock peels
// off before giving up.
const maxStacked = 16

// MountOptions says which device MountBlock binds onto which target file.
type MountOptions struct {
	// Device is the block device node to publish, e.g. /dev/loop3.
	Device string
	// Target is the file the device node is bound onto; it is created
	// (with its parent directories) when missing.
	Target string
	// ReadOnly makes the bind mount read-only. The kernel does not stop
	// writes through a device node on a read-only mount, so a driver that
	// must enforce read-only access also has to refuse writable attachment
	// at the backend.
	ReadOnly bool
}

// EnsureBlock creates target as an empty regular file, creating missing
// parent directories with mode 0750. It is idempotent: an existing regular
// file, or a block device node bound onto it, is left alone. A directory or
// any other file type at target is refused with codes.FailedPrecondition.
func EnsureBlock(ctx context.Context, target string) error {
	if err := checkPath("target", target); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return ctxError(err, "ensure block target %s", target)
	}
	fi, err := os.Lstat(target)
	if err == nil {
		return checkTargetType(target, fi)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return errorf(codes.Internal, err, "inspect block target %s", target)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return errorf(codes.Internal, err, "create parent of block target %s", target)
	}
	fd, err := unix.Open(target, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
	if errors.Is(err, unix.EEXIST) { // lost a race with another creator
		fi, err := os.Lstat(target)
		if err != nil {
			return errorf(codes.Internal, err, "inspect block target %s", target)
		}
		return checkTargetType(target, fi)
	}
	if err != nil {
		return errorf(codes.Internal, err, "create block target %s", target)
	}
	return unix.Close(fd)
}

func checkTargetType(target string, fi fs.FileInfo) error {
	switch m := fi.Mode(); {
	case m.IsRegular(), m&fs.ModeDevice != 0 && m&fs.ModeCharDevice == 0:
		return nil
	case m.IsDir():
		return errorf(codes.FailedPrecondition, nil,
			"block target %s is a directory, want a file: publish it as a block volume at a new path", target)
	default:
		return errorf(codes.FailedPrecondition, nil,
			"block target %s has file type %s, want a regular file", target, m.Type())
	}
}

// MountBlock binds the device node opts.Device onto the file opts.Target,
// creating the file first (see EnsureBlock). It is idempotent: when the same
// device is already bound there with the same read-only setting it returns
// nil. A target bound to another device, or bound with the other read-only
// setting, is refused with codes.AlreadyExists; a missing device gives
// codes.NotFound and a device that is not a block device
// codes.InvalidArgument.
func MountBlock(ctx context.Context, opts MountOptions) error {
	if err := checkPath("device", opts.Device); err != nil {
		return err
	}
	var dev unix.Stat_t
	if err := unix.Stat(opts.Device, &dev); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return errorf(codes.NotFound, err, "block device %s", opts.Device)
		}
		return errorf(codes.Internal, err, "stat block device %s", opts.Device)
	}
	if dev.Mode&unix.S_IFMT != unix.S_IFBLK {
		return errorf(codes.InvalidArgument, nil, "%s is not a block device", opts.Device)
	}
	if err := EnsureBlock(ctx, opts.Target); err != nil {
		return err
	}
	mounted, err := mountpoint.Is(opts.Target)
	if err != nil {
		return errorf(codes.Internal, err, "check block target %s", opts.Target)
	}
	if mounted {
		return checkBound(opts, dev.Rdev)
	}
	if err := unix.Mount(opts.Device, opts.Target, "", unix.MS_BIND, ""); err != nil {
		return errorf(codes.Internal, err, "bind %s onto %s", opts.Device, opts.Target)
	}
	if opts.ReadOnly {
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
		if err := unix.Mount("", opts.Target, "", flags, ""); err != nil {
			_ = unix.Unmount(opts.Target, unix.UMOUNT_NOFOLLOW)
			return errorf(codes.Internal, err, "remount %s read-only", opts.Target)
		}
	}
	return nil
}

// checkBound decides whether an existing mount at opts.Target is the one
// MountBlock would have made.
func checkBound(opts MountOptions, rdev uint64) error {
	var st unix.Stat_t
	if err := unix.Stat(opts.Target, &st); err != nil {
		return errorf(codes.Internal, err, "stat block target %s", opts.Target)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK || st.Rdev != rdev {
		return errorf(codes.AlreadyExists, nil,
			"block target %s is already mounted from something other than %s", opts.Target, opts.Device)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(opts.Target, &sfs); err != nil {
		return errorf(codes.Internal, err, "statfs block target %s", opts.Target)
	}
	if ro := sfs.Flags&unix.ST_RDONLY != 0; ro != opts.ReadOnly {
		return errorf(codes.AlreadyExists, nil,
			"block target %s is already bound to %s with read-only=%t, want read-only=%t",
			opts.Target, opts.Device, ro, opts.ReadOnly)
	}
	return nil
}

// UnmountBlock removes every bind mount on target and then the target file
// itself, if it is what EnsureBlock makes: an empty regular file. A target
// that does not exist, or is not mounted, is fine. A busy mount gives
// codes.FailedPrecondition and leaves the target in place; a directory, a
// file holding data, a symlink or any other file type at target is never
// removed (codes.FailedPrecondition).
func UnmountBlock(ctx context.Context, target string) error {
	if err := checkPath("target", target); err != nil {
		return err
	}
peel:
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return ctxError(err, "unmount block target %s", target)
		}
		mounted, err := mountpoint.Is(target)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil && !mountpoint.IsCorrupt(err) {
			return errorf(codes.Internal, err, "check block target %s", target)
		}
		if !mounted && err == nil {
			break
		}
		if i == maxStacked {
			return errorf(codes.Internal, nil, "block target %s still mounted after %d unmounts", target, i)
		}
		err = unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
		switch {
		case err == nil:
		case errors.Is(err, unix.EINVAL): // not a mount point after all
			break peel
		case errors.Is(err, unix.ENOENT):
			return nil
		case errors.Is(err, unix.EBUSY):
			return errorf(codes.FailedPrecondition, err, "block target %s is in use", target)
		default:
			return errorf(codes.Internal, err, "unmount block target %s", target)
		}
	}
	fi, err := os.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return errorf(codes.Internal, err, "inspect block target %s", target)
	}
	switch m := fi.Mode(); {
	case m.IsDir():
		return errorf(codes.FailedPrecondition, nil,
			"block target %s is a directory; refusing to remove it", target)
	case !m.IsRegular():
		return errorf(codes.FailedPrecondition, nil,
			"block target %s has file type %s, not the empty file EnsureBlock makes: left in place", target, m.Type())
	case fi.Size() != 0:
		return errorf(codes.FailedPrecondition, nil,
			"block target %s is a file holding %d bytes, not the empty file EnsureBlock makes: left in place", target, fi.Size())
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errorf(codes.Internal, err, "remove block target %s", target)
	}
	return nil
}

//go:build linux

package block

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/mountpoint"
	"github.com/csikit/csikit/internal/safepath"
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
// any other file type at target (a symlink included) is refused with
// codes.FailedPrecondition, and so is a symlink anywhere in its parents:
// the parents are opened component by component with O_NOFOLLOW and the
// file is created relative to them.
func EnsureBlock(ctx context.Context, target string) error {
	if err := checkPath("target", target); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return ctxError(err, "ensure block target %s", target)
	}
	pfd, err := safepath.Open("block target", filepath.Dir(target), true)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	return ensureAt(pfd, target)
}

// ensureAt is EnsureBlock in the directory open at pfd.
func ensureAt(pfd int, target string) error {
	base := filepath.Base(target)
	fd, err := unix.Openat(pfd, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
	if errors.Is(err, unix.EEXIST) { // there already, or lost a race with another creator
		var st unix.Stat_t
		if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return errorf(codes.Internal, err, "inspect block target %s", target)
		}
		return checkTargetMode(target, st.Mode)
	}
	if err != nil {
		return errorf(codes.Internal, err, "create block target %s", target)
	}
	return unix.Close(fd)
}

// checkTargetMode accepts what may sit at a block target: a regular file,
// or a block device node bound onto one.
func checkTargetMode(target string, mode uint32) error {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG, unix.S_IFBLK:
		return nil
	case unix.S_IFDIR:
		return errorf(codes.FailedPrecondition, nil,
			"block target %s is a directory, want a file: publish it as a block volume at a new path", target)
	case unix.S_IFLNK:
		return errorf(codes.FailedPrecondition, nil,
			"block target %s is a symlink, which is never followed: want a regular file", target)
	default:
		return errorf(codes.FailedPrecondition, nil,
			"block target %s has file type %#o, want a regular file", target, mode&unix.S_IFMT)
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
	// Bind onto the file found without following symlinks.
	tfd, err := safepath.Open("block target", opts.Target, false)
	if err != nil {
		return err
	}
	err = unix.Mount(opts.Device, safepath.FdPath(tfd), "", unix.MS_BIND, "")
	unix.Close(tfd)
	if err != nil {
		return errorf(codes.Internal, err, "bind %s onto %s", opts.Device, opts.Target)
	}
	if opts.ReadOnly {
		if err := remountReadOnly(opts.Target, dev.Rdev); err != nil {
			_ = unix.Unmount(opts.Target, unix.UMOUNT_NOFOLLOW)
			return errorf(codes.Internal, err, "remount %s read-only", opts.Target)
		}
	}
	return nil
}

// remountReadOnly makes the bind of the device rdev at target read-only,
// through the new mount (found again without following symlinks).
func remountReadOnly(target string, rdev uint64) error {
	return safepath.RemountBind("block target", target, unix.MS_RDONLY, func(st *unix.Stat_t) bool {
		return st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == rdev
	})
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
	pfd, err := safepath.Open("block target", filepath.Dir(target), false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
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
	var st unix.Stat_t
	base := filepath.Base(target)
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return errorf(codes.Internal, err, "inspect block target %s", target)
	}
	switch typ := st.Mode & unix.S_IFMT; {
	case typ == unix.S_IFDIR:
		return errorf(codes.FailedPrecondition, nil,
			"block target %s is a directory; refusing to remove it", target)
	case typ != unix.S_IFREG:
		return errorf(codes.FailedPrecondition, nil,
			"block target %s has file type %#o, not the empty file EnsureBlock makes: left in place", target, typ)
	case st.Size != 0:
		return errorf(codes.FailedPrecondition, nil,
			"block target %s is a file holding %d bytes, not the empty file EnsureBlock makes: left in place", target, st.Size)
	}
	if err := unix.Unlinkat(pfd, base, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return errorf(codes.Internal, err, "remove block target %s", target)
	}
	return nil
}

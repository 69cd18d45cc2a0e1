//go:build linux

package mount

import (
	"context"
	"errors"

	"github.com/csikit/csikit/internal/safepath"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// Publish bind-mounts the directory opts.Source onto opts.Target, creating
// the target directory (and missing parents, mode 0750) first, and remounts
// the bind read-only (and with opts.MountFlags) when asked. MountFlags that
// a bind mount cannot apply are refused with codes.InvalidArgument (see
// CheckBindFlags) before anything is touched. Mounting is done
// with the mount syscall; no helper program runs and the mount table is
// never read.
//
// Neither path may contain a symlink, in a parent or as the last component:
// both are opened component by component with O_NOFOLLOW, and the bind is
// made between the descriptors found (through /proc/self/fd), so it lands
// exactly at the directory the CO named. A symlink gives
// codes.FailedPrecondition naming it.
//
// Source must be a mount point — the staging path of a staged volume — and,
// when opts.SourceDevice is set, a mount of that device; otherwise Publish
// refuses with codes.FailedPrecondition (a volume whose stage failed or was
// undone would otherwise expose the node's own disk to the pod). A driver
// publishing a plain directory of its own sets opts.AllowUnmountedSource.
//
// It is idempotent: a retry that finds Source's file system bound at
// Target (the same directory: device and inode number) with the same
// per-mount flags (ro, nosuid, nodev, noexec, noatime, nodiratime: those of
// the source mount plus the requested ones) returns nil. A target mounted
// from anything else, or with other flags, gives codes.AlreadyExists and is
// left alone; a second mount is never stacked. A corrupt mount at the
// target is unmounted and replaced. A missing Source gives
// codes.FailedPrecondition (the volume is not staged), a target that is not
// a directory codes.FailedPrecondition.
func (m *Mounter) Publish(ctx context.Context, o PublishOptions) error {
	if err := checkPath("source", o.Source); err != nil {
		return err
	}
	if err := checkPath("target", o.Target); err != nil {
		return err
	}
	if o.SourceDevice != "" {
		if err := checkPath("source device", o.SourceDevice); err != nil {
			return err
		}
	}
	if err := CheckBindFlags(o.MountFlags); err != nil {
		return err
	}
	opts, err := parseOptions(o.MountFlags)
	if err != nil {
		return err
	}
	if o.ReadOnly {
		opts.flags |= unix.MS_RDONLY
	}
	if err := ctx.Err(); err != nil {
		return ctxError(err, "publish %s", o.Target)
	}
	defer m.lock(o.Target)()

	sfd, err := openPath("source", o.Source, false)
	if errors.Is(err, unix.ENOENT) {
		return errorf(codes.FailedPrecondition, err, "source %s does not exist: stage the volume first", o.Source)
	}
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	var src unix.Stat_t
	if err := unix.Fstat(sfd, &src); err != nil {
		return errorf(codes.Internal, err, "stat source %s", o.Source)
	}
	if src.Mode&unix.S_IFMT != unix.S_IFDIR {
		return errorf(codes.InvalidArgument, nil, "source %s is not a directory", o.Source)
	}
	if err := checkSource(sfd, &src, o); err != nil {
		return err
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(sfd, &sfs); err != nil {
		return errorf(codes.Internal, err, "statfs source %s", o.Source)
	}
	// The flags the bind gets: the source mount's, plus the requested ones.
	flags := statfsFlags(sfs.Flags) | opts.flags

	// Refuse symlinks and create what is missing before looking further.
	tfd, err := openPath("target", o.Target, true)
	if err != nil {
		return err
	}
	unix.Close(tfd)
	mounted, err := m.probeTarget(ctx, o.Target)
	if err != nil {
		return err
	}
	if mounted {
		return checkPublished(o, &src, msToST(flags))
	}
	// Open the target again (a corrupt mount may just have gone) and bind
	// between the two descriptors.
	tfd, err = openPath("target", o.Target, false)
	if err != nil {
		return err
	}
	defer unix.Close(tfd)
	var tst unix.Stat_t
	if err := unix.Fstat(tfd, &tst); err != nil {
		return errorf(codes.Internal, err, "stat target %s", o.Target)
	}
	if tst.Mode&unix.S_IFMT != unix.S_IFDIR {
		return errorf(codes.FailedPrecondition, nil, "target %s is not a directory", o.Target)
	}
	// The look-up above went by path; the path may have changed since (a
	// parent swapped for a symlink and back). Decide on the descriptor the
	// bind would use: if it is already a mount's root, never stack on it.
	if root, known := fdIsMountRoot(tfd); known && root {
		if tst.Dev != src.Dev || tst.Ino != src.Ino {
			return errorf(codes.AlreadyExists, nil,
				"target %s is already mounted from something other than %s", o.Target, o.Source)
		}
		return checkFlags(o.Target, msToST(flags), true)
	}
	if err := unix.Mount(fdPath(sfd), fdPath(tfd), "", unix.MS_BIND, ""); err != nil {
		return errorf(codes.Internal, err, "bind %s onto %s", o.Source, o.Target)
	}
	if opts.flags != 0 {
		// A bind takes its flags only on remount, through the new mount
		// (the old descriptor names the directory under it). Keep the flags
		// of the source mount (nosuid, nodev, ...) and add the requested ones.
		err := remountBind(o.Target, &src, flags)
		if err != nil {
			if uerr := unix.Unmount(o.Target, unix.UMOUNT_NOFOLLOW); uerr != nil {
				m.log.ErrorContext(ctx, "undo bind after failed remount", "target", o.Target, "err", uerr)
			}
			return errorf(codes.Internal, err, "remount %s with the requested flags", o.Target)
		}
	}
	m.log.InfoContext(ctx, "published", "source", o.Source, "target", o.Target,
		"readOnly", o.ReadOnly, "flags", o.MountFlags)
	return nil
}

// remountBind applies flags to the bind just made at target, after
// checking that the mount found there is that bind.
func remountBind(target string, src *unix.Stat_t, flags uintptr) error {
	return safepath.RemountBind("target", target, flags, func(st *unix.Stat_t) bool {
		return st.Dev == src.Dev && st.Ino == src.Ino
	})
}

// checkSource refuses a source that is not a mount point (unless
// AllowUnmountedSource) or, with SourceDevice, not a mount of that device.
func checkSource(sfd int, src *unix.Stat_t, o PublishOptions) error {
	if o.AllowUnmountedSource && o.SourceDevice == "" {
		return nil
	}
	mnt, err := isMountRootFd(sfd)
	if err != nil {
		return errorf(codes.Internal, err, "check mount at source %s", o.Source)
	}
	if !mnt {
		return errorf(codes.FailedPrecondition, nil,
			"source %s is not a mount point: the volume is not staged there (stage it first; a driver publishing a plain directory sets AllowUnmountedSource)", o.Source)
	}
	if o.SourceDevice == "" {
		return nil
	}
	var dev unix.Stat_t
	if err := unix.Stat(o.SourceDevice, &dev); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return errorf(codes.FailedPrecondition, err, "source device %s does not exist", o.SourceDevice)
		}
		return errorf(codes.Internal, err, "stat source device %s", o.SourceDevice)
	}
	if dev.Mode&unix.S_IFMT != unix.S_IFBLK {
		return errorf(codes.InvalidArgument, nil, "source device %s is not a block device", o.SourceDevice)
	}
	if src.Dev != dev.Rdev {
		return errorf(codes.FailedPrecondition, nil,
			"source %s holds device %d:%d, not %s (%d:%d): the volume is not staged there",
			o.Source, unix.Major(src.Dev), unix.Minor(src.Dev), o.SourceDevice, unix.Major(dev.Rdev), unix.Minor(dev.Rdev))
	}
	return nil
}

// checkPublished decides whether the mount at o.Target is the bind Publish
// would have made: same directory (device and inode) and the same per-mount
// flags (want, as statfs reports them).
func checkPublished(o PublishOptions, src *unix.Stat_t, want int64) error {
	var st unix.Stat_t
	if err := unix.Stat(o.Target, &st); err != nil {
		return errorf(codes.Internal, err, "stat target %s", o.Target)
	}
	if st.Dev != src.Dev || st.Ino != src.Ino {
		return errorf(codes.AlreadyExists, nil,
			"target %s is already mounted from something other than %s", o.Target, o.Source)
	}
	return checkFlags(o.Target, want, true)
}

// fdIsMountRoot reports whether the directory open at fd is the root of a
// mount (statx's STATX_ATTR_MOUNT_ROOT, Linux 5.8+); known is false where
// the kernel cannot say.
func fdIsMountRoot(fd int) (root, known bool) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE, &stx); err != nil ||
		stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, false
	}
	return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, true
}

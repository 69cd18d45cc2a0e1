//go:build linux

package mount

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// Publish bind-mounts the directory opts.Source onto opts.Target, creating
// the target directory (and missing parents, mode 0750) first, and remounts
// the bind read-only (and with opts.MountFlags) when asked. Mounting is done
// with the mount syscall; no helper program runs and the mount table is
// never read.
//
// It is idempotent: a retry that finds Source already bound at Target with
// the same read-only setting returns nil. A target mounted from anything
// else, or with the other read-only setting, gives codes.AlreadyExists and
// is left alone; a second mount is never stacked. A corrupt mount at the
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
	opts, err := parseOptions(o.MountFlags)
	if err != nil {
		return err
	}
	if len(opts.data) > 0 {
		return errorf(codes.InvalidArgument, nil,
			"bind mounts take only per-mount flags, got file-system options %q", opts.data)
	}
	if o.ReadOnly {
		opts.flags |= unix.MS_RDONLY
	}
	var src unix.Stat_t
	if err := unix.Stat(o.Source, &src); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return errorf(codes.FailedPrecondition, err, "source %s does not exist: stage the volume first", o.Source)
		}
		return errorf(codes.Internal, err, "stat source %s", o.Source)
	}
	if src.Mode&unix.S_IFMT != unix.S_IFDIR {
		return errorf(codes.InvalidArgument, nil, "source %s is not a directory", o.Source)
	}
	if err := ctx.Err(); err != nil {
		return ctxError(err, "publish %s", o.Target)
	}
	defer m.lock(o.Target)()

	mounted, err := m.probeTarget(ctx, o.Target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(o.Target, 0o750); err != nil {
			return errorf(codes.Internal, err, "create target %s", o.Target)
		}
	case err != nil:
		return err
	case mounted:
		return checkPublished(o, &src)
	default:
		if err := checkIsDir(o.Target); err != nil {
			return err
		}
	}
	if err := unix.Mount(o.Source, o.Target, "", unix.MS_BIND, ""); err != nil {
		return errorf(codes.Internal, err, "bind %s onto %s", o.Source, o.Target)
	}
	if opts.flags != 0 {
		// A bind takes its flags only on remount. Keep the flags of the
		// source mount (nosuid, nodev, ...) and add the requested ones.
		var sfs unix.Statfs_t
		err := unix.Statfs(o.Target, &sfs)
		if err == nil {
			flags := unix.MS_BIND | unix.MS_REMOUNT | statfsFlags(sfs.Flags) | opts.flags
			err = unix.Mount("", o.Target, "", flags, "")
		}
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

// checkPublished decides whether the mount at o.Target is the bind Publish
// would have made: same directory (device and inode) and same read-only
// setting.
func checkPublished(o PublishOptions, src *unix.Stat_t) error {
	var st unix.Stat_t
	if err := unix.Stat(o.Target, &st); err != nil {
		return errorf(codes.Internal, err, "stat target %s", o.Target)
	}
	if st.Dev != src.Dev || st.Ino != src.Ino {
		return errorf(codes.AlreadyExists, nil,
			"target %s is already mounted from something other than %s", o.Target, o.Source)
	}
	return checkReadOnly(o.Target, o.ReadOnly)
}

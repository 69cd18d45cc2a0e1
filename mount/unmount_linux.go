//go:build linux

package mount

import (
	"context"
	"errors"
	"github.com/csikit/csikit/internal/mountpoint"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// maxStacked bounds how many mounts stacked on one target are peeled off
// before giving up.
const maxStacked = 16

// Unpublish unmounts target (every mount stacked there) and then removes
// the target with os.Remove, which deletes only a file or an empty
// directory: contents of a path that might still be a mount are never
// deleted, and nothing is ever removed recursively. A target that does not
// exist or is not mounted is fine. A corrupt mount (ENOTCONN, ESTALE, EIO)
// is unmounted, lazily if it will not go otherwise. A busy mount gives
// codes.FailedPrecondition unless opts.Lazy; a directory left non-empty
// after unmounting gives codes.FailedPrecondition and is left in place.
func (m *Mounter) Unpublish(ctx context.Context, target string, opts UnmountOptions) error {
	if err := checkPath("target", target); err != nil {
		return err
	}
	defer m.lock(target)()
	if err := m.unmountAll(ctx, target, opts.Lazy); err != nil {
		return err
	}
	err := os.Remove(target)
	switch {
	case err == nil:
		m.log.InfoContext(ctx, "removed target", "target", target)
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
		return errorf(codes.FailedPrecondition, err,
			"target %s is not a mount point but holds files: left in place, remove them by hand", target)
	default:
		return errorf(codes.Internal, err, "remove target %s", target)
	}
}

// Unstage unmounts the staging target (every mount stacked there) and
// leaves the directory itself to the CO, which created it. Missing,
// unmounted and corrupt targets are handled as by Unpublish.
func (m *Mounter) Unstage(ctx context.Context, target string, opts UnmountOptions) error {
	if err := checkPath("staging target", target); err != nil {
		return err
	}
	defer m.lock(target)()
	return m.unmountAll(ctx, target, opts.Lazy)
}

// mountState reports whether path is a mount point and whether that mount
// is corrupt. The mount-root check alone may succeed on a dead FUSE mount
// (cached attributes), so a mount point is probed with statfs too.
func mountState(path string) (mounted, corrupt bool, err error) {
	mounted, err = mountpoint.Is(path)
	if IsCorruptedMount(err) {
		return true, true, nil
	}
	if err != nil || !mounted {
		return false, false, err
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(path, &sfs); IsCorruptedMount(err) {
		return true, true, nil
	}
	return true, false, nil
}

// probeTarget reports whether target is mounted, after unmounting a corrupt
// mount there. A missing target gives an error matching fs.ErrNotExist.
func (m *Mounter) probeTarget(ctx context.Context, target string) (bool, error) {
	mounted, corrupt, err := mountState(target)
	if errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if err != nil {
		return false, errorf(codes.Internal, err, "check mount at %s", target)
	}
	if corrupt {
		m.log.WarnContext(ctx, "replacing corrupt mount", "target", target)
		if err := m.unmountAll(ctx, target, false); err != nil {
			return false, err
		}
		return false, nil
	}
	return mounted, nil
}

// unmountAll peels every mount off target.
func (m *Mounter) unmountAll(ctx context.Context, target string, lazy bool) error {
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return ctxError(err, "unmount %s", target)
		}
		mounted, corrupt, err := mountState(target)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return errorf(codes.Internal, err, "check mount at %s", target)
		}
		if !mounted {
			return nil
		}
		if i == maxStacked {
			return errorf(codes.Internal, nil, "%s still mounted after %d unmounts", target, i)
		}
		flags := unix.UMOUNT_NOFOLLOW
		if lazy {
			flags |= unix.MNT_DETACH
		}
		err = unix.Unmount(target, flags)
		if err != nil && !lazy && (corrupt || IsCorruptedMount(err)) {
			// A dead mount holds nothing reachable: detaching it is safe.
			err = unix.Unmount(target, unix.UMOUNT_NOFOLLOW|unix.MNT_DETACH)
		}
		switch {
		case err == nil:
			m.log.InfoContext(ctx, "unmounted", "target", target, "lazy", lazy, "corrupt", corrupt)
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not a mount point (any more)
		case errors.Is(err, unix.EBUSY):
			return errorf(codes.FailedPrecondition, err,
				"%s is in use: retry once its users are gone, or unmount lazily", target)
		default:
			return errorf(codes.Internal, err, "unmount %s", target)
		}
	}
}

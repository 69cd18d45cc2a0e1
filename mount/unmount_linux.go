//go:build linux

package mount

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/csikit/csikit/internal/mountpoint"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// maxStacked bounds how many mounts stacked on one target are peeled off
// before giving up.
const maxStacked = 16

// Unpublish unmounts target (every mount stacked there) and then removes
// what Publish (or block.EnsureBlock) would have created there: an empty
// directory or an empty regular file. Anything else is left in place with
// codes.FailedPrecondition — a directory that still holds files, a file
// holding data, a symlink, a device node — so a path that might still be a
// mount, or a file the CO never meant, keeps its contents; nothing is ever
// removed recursively. A symlink anywhere in target's parents is refused
// the same way (nothing is unmounted through it). A target that does not
// exist or is not mounted is fine. A corrupt mount (ENOTCONN, ESTALE, EIO)
// is unmounted, lazily if it will not go otherwise. A busy mount gives
// codes.FailedPrecondition unless opts.Lazy.
func (m *Mounter) Unpublish(ctx context.Context, target string, opts UnmountOptions) error {
	if err := checkPath("target", target); err != nil {
		return err
	}
	defer m.lock(target)()
	pfd, err := openPath("target", filepath.Dir(target), false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := m.unmountAll(ctx, target, opts.Lazy); err != nil {
		return err
	}
	return m.removeTarget(ctx, pfd, target)
}

// removeTarget removes target, whose parent is open at pfd, if it is an
// empty directory or an empty regular file.
func (m *Mounter) removeTarget(ctx context.Context, pfd int, target string) error {
	base := filepath.Base(target)
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return errorf(codes.Internal, err, "inspect target %s", target)
	}
	var err error
	switch typ := st.Mode & unix.S_IFMT; {
	case typ == unix.S_IFDIR:
		err = unix.Unlinkat(pfd, base, unix.AT_REMOVEDIR)
	case typ == unix.S_IFREG && st.Size == 0:
		err = unix.Unlinkat(pfd, base, 0)
	case typ == unix.S_IFREG:
		return errorf(codes.FailedPrecondition, nil,
			"target %s is a file holding %d bytes, not the empty file or directory a publish makes: left in place, remove it by hand", target, st.Size)
	default:
		return errorf(codes.FailedPrecondition, nil,
			"target %s is a %s, not the empty file or directory a publish makes: left in place, remove it by hand", target, fileType(typ))
	}
	switch {
	case err == nil:
		m.log.InfoContext(ctx, "removed target", "target", target)
		return nil
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
		return errorf(codes.FailedPrecondition, err,
			"target %s is not a mount point but holds files: left in place, remove them by hand", target)
	case errors.Is(err, unix.EBUSY):
		return errorf(codes.FailedPrecondition, err, "target %s is still a mount point", target)
	default:
		return errorf(codes.Internal, err, "remove target %s", target)
	}
}

func fileType(typ uint32) string {
	switch typ {
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	}
	return "file of unknown type"
}

// Unstage unmounts the staging target (every mount stacked there) and
// leaves the directory itself to the CO, which created it. Missing,
// unmounted and corrupt targets, and symlinked parents, are handled as by
// Unpublish.
func (m *Mounter) Unstage(ctx context.Context, target string, opts UnmountOptions) error {
	if err := checkPath("staging target", target); err != nil {
		return err
	}
	defer m.lock(target)()
	pfd, err := openPath("staging target", filepath.Dir(target), false)
	if errors.Is(err, unix.ENOENT) {
		if opts.Encryption != nil {
			return m.CloseEncrypted(ctx, opts.Encryption.VolumeID)
		}
		return nil
	}
	if err != nil {
		return err
	}
	unix.Close(pfd)
	if err := m.unmountAll(ctx, target, opts.Lazy); err != nil {
		return err
	}
	m.forget(target)
	if opts.Encryption != nil {
		return m.CloseEncrypted(ctx, opts.Encryption.VolumeID)
	}
	return nil
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

//go:build linux

package fstree

import (
	"context"
	"errors"
	"path/filepath"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/codederr"
	"github.com/csikit/csikit/internal/mountpoint"
)

// removeRounds bounds how often a directory that keeps being refilled is
// emptied again before Remove gives up.
const removeRounds = 4

func remove(ctx context.Context, dir string, opts RemoveOptions) error {
	if err := ctx.Err(); err != nil {
		return codederr.FromContext(err, "remove %s", dir)
	}
	// One statx gives the root's type, identity and, on Linux 5.8+,
	// whether it is a mount point.
	var st unix.Statx_t
	flags := unix.AT_SYMLINK_NOFOLLOW | unix.AT_NO_AUTOMOUNT | unix.AT_STATX_DONT_SYNC
	if err := unix.Statx(unix.AT_FDCWD, dir, flags, unix.STATX_TYPE|unix.STATX_INO, &st); err != nil {
		if isNotExist(err) {
			return nil
		}
		return sysError("statx", dir, err)
	}
	isMount := st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		var err error
		if isMount, err = mountpoint.Is(dir); err != nil {
			return sysError("check mount at", dir, err)
		}
	}
	if isMount {
		return mountError("remove", dir)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if opts.KeepRoot {
			return codederr.Errorf(codes.FailedPrecondition, nil, "remove below %s: not a directory", dir)
		}
		// A file or a symlink: remove that entry alone.
		if err := unix.Unlink(dir); err != nil && !isNotExist(err) {
			if errors.Is(err, unix.EBUSY) {
				return mountError("remove", dir)
			}
			return sysError("remove", dir, err)
		}
		return nil
	}
	fd, err := openRoot(dir)
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		return sysError("open", dir, err)
	}
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		unix.Close(fd)
		return sysError("stat", dir, err)
	}
	if fst.Dev != unix.Mkdev(st.Dev_major, st.Dev_minor) || fst.Ino != st.Ino {
		unix.Close(fd)
		return codederr.Errorf(codes.Aborted, nil, "remove %s: it was replaced while being removed; retry", dir)
	}
	w := newWalker(ctx)
	defer w.release()
	// Find any mount below before removing anything, so the common refusal
	// leaves the tree whole; the removal walk refuses mounts on its own too.
	mnt, empty, err := w.mountBelow(fd, dir)
	if err != nil || mnt != "" {
		unix.Close(fd)
		if err != nil {
			return sysError("look for mounts below", dir, err)
		}
		return mountError("remove "+dir, mnt)
	}
	if !empty { // an empty directory goes straight to rmdir, which says if it filled up meanwhile
		err = w.removeContents(fd, dir)
	}
	unix.Close(fd)
	if err != nil || opts.KeepRoot {
		return err
	}
	for round := 0; ; round++ {
		err := unix.Rmdir(dir)
		switch {
		case err == nil, isNotExist(err):
			return nil
		case errors.Is(err, unix.ENOTEMPTY) && round < removeRounds:
			// Something was created meanwhile: empty it again.
			fd, err := openRoot(dir)
			if err != nil {
				return sysError("open", dir, err)
			}
			err = w.removeContents(fd, dir)
			unix.Close(fd)
			if err != nil {
				return err
			}
		case errors.Is(err, unix.ENOTEMPTY):
			return codederr.Errorf(codes.Aborted, err, "remove %s: still being written to", dir)
		case errors.Is(err, unix.EBUSY):
			return mountError("remove", dir)
		default:
			return sysError("remove", dir, err)
		}
	}
}

// removeContents removes everything below the directory open at fd, whose
// path (for messages only) is path. Subdirectories are entered only through
// openAt, which refuses symlinks and mount points.
func (w *walker) removeContents(fd int, path string) error {
	for round := 0; ; round++ {
		ents, err := w.readDir(fd)
		if err != nil {
			return sysError("read directory", path, err)
		}
		if len(ents) == 0 {
			return nil
		}
		if round == removeRounds {
			return codederr.Errorf(codes.Aborted, nil, "remove %s: still being written to", path)
		}
		for _, e := range ents {
			p := filepath.Join(path, e.name)
			if err := w.tick(p); err != nil {
				return err
			}
			if err := w.removeEntry(fd, e, p); err != nil {
				return err
			}
		}
	}
}

// removeEntry removes one entry of the directory open at fd.
func (w *walker) removeEntry(fd int, e dirent, path string) error {
	isDir := e.typ == unix.DT_DIR
	if e.typ == unix.DT_UNKNOWN {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if isNotExist(err) {
				return nil
			}
			return sysError("lstat", path, err)
		}
		isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	for try := 0; try < 4; try++ {
		if !isDir {
			err := unix.Unlinkat(fd, e.name, 0)
			switch {
			case err == nil, isNotExist(err):
				return nil
			case errors.Is(err, unix.EISDIR), errors.Is(err, unix.EPERM) && w.isDirAt(fd, e.name):
				isDir = true // replaced by a directory meanwhile
				continue
			case errors.Is(err, unix.EBUSY):
				return mountError("remove", path)
			default:
				return sysError("remove", path, err)
			}
		}
		cfd, err := w.openAt(fd, e.name, unix.O_RDONLY|unix.O_DIRECTORY)
		switch {
		case isNotExist(err):
			return nil
		case errors.Is(err, unix.EXDEV):
			return mountError("remove", path)
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			isDir = false // replaced by a symlink or a file: remove that
			continue
		case err != nil:
			return sysError("open", path, err)
		}
		err = w.removeContents(cfd, path)
		unix.Close(cfd)
		if err != nil {
			return err
		}
		err = unix.Unlinkat(fd, e.name, unix.AT_REMOVEDIR)
		switch {
		case err == nil, isNotExist(err):
			return nil
		case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.ENOTDIR):
			continue // refilled or replaced meanwhile: go again
		case errors.Is(err, unix.EBUSY):
			return mountError("remove", path)
		default:
			return sysError("remove", path, err)
		}
	}
	return codederr.Errorf(codes.Aborted, nil, "remove %s: it keeps changing while being removed", path)
}

func (w *walker) isDirAt(fd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

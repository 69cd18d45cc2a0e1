//go:build linux

package fstree

import (
	"context"
	"errors"

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
	// The common case, an empty directory, costs one rmdir: it removes
	// nothing but an empty directory that is not a mount point (EBUSY),
	// never a symlink (ENOTDIR) or a file. Anything else it refuses takes
	// the checked walk below, which reports it.
	if !opts.KeepRoot {
		if err := unix.Rmdir(dir); err == nil || isNotExist(err) {
			return nil
		}
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
		if isNotExist(err) {
			return nil // removed meanwhile
		}
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
// openAt, which refuses symlinks and mount points. It walks depth first
// with a stack of its own and a chain of descriptors, so no tree is too
// deep for it: neither the goroutine's stack nor the descriptor limit
// bounds the depth.
func (w *walker) removeContents(fd int, path string) error {
	ch := newChain(w, path, fd)
	defer ch.close()
	type frame struct {
		ents  []dirent
		i     int
		round int // reads of the directory that found entries
		tries int // attempts at removing ents[i]
	}
	stack := []frame{{}}
	for {
		f := &stack[len(stack)-1]
		if f.i < len(f.ents) {
			e := &f.ents[f.i]
			if err := w.tick(ch, e.name); err != nil {
				return err
			}
			cfd, err := w.removeEntry(ch, e)
			if err != nil {
				return err
			}
			if cfd < 0 { // removed
				f.i++
				f.tries = 0
				continue
			}
			if err := ch.push(e.name, cfd); err != nil {
				return err
			}
			stack = append(stack, frame{})
			continue
		}
		ents, err := w.readDir(ch.fd())
		if err != nil {
			return sysError("read directory", ch.path(""), err)
		}
		if len(ents) > 0 {
			if f.round == removeRounds {
				return codederr.Errorf(codes.Aborted, nil, "remove %s: still being written to", ch.path(""))
			}
			f.round++
			f.ents, f.i = ents, 0
			continue
		}
		if len(stack) == 1 {
			return nil
		}
		// The deepest directory is empty: remove it from its parent.
		name := ch.levels[len(ch.levels)-1].name
		stack = stack[:len(stack)-1]
		if err := ch.pop(); err != nil {
			return err
		}
		p := &stack[len(stack)-1]
		err = unix.Unlinkat(ch.fd(), name, unix.AT_REMOVEDIR)
		switch {
		case err == nil, isNotExist(err):
			p.i++
			p.tries = 0
		case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.ENOTDIR):
			// Refilled or replaced meanwhile: go again.
			if p.tries++; p.tries == removeRounds {
				return codederr.Errorf(codes.Aborted, nil, "remove %s: it keeps changing while being removed", ch.path(name))
			}
		case errors.Is(err, unix.EBUSY):
			return mountError("remove", ch.path(name))
		default:
			return sysError("remove", ch.path(name), err)
		}
	}
}

// removeEntry removes the entry e of the chain's deepest directory when it
// is not a directory, and returns -1; a directory it opens and returns the
// descriptor, for the caller to empty and remove.
func (w *walker) removeEntry(ch *chain, e *dirent) (int, error) {
	fd := ch.fd()
	isDir := e.typ == unix.DT_DIR
	if e.typ == unix.DT_UNKNOWN {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if isNotExist(err) {
				return -1, nil
			}
			return -1, sysError("lstat", ch.path(e.name), err)
		}
		isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	}
	for try := 0; try < removeRounds; try++ {
		if !isDir {
			err := unix.Unlinkat(fd, e.name, 0)
			switch {
			case err == nil, isNotExist(err):
				return -1, nil
			case errors.Is(err, unix.EISDIR), errors.Is(err, unix.EPERM) && w.isDirAt(fd, e.name):
				isDir = true // replaced by a directory meanwhile
				continue
			case errors.Is(err, unix.EBUSY):
				return -1, mountError("remove", ch.path(e.name))
			default:
				return -1, sysError("remove", ch.path(e.name), err)
			}
		}
		cfd, err := w.openAt(fd, e.name, unix.O_RDONLY|unix.O_DIRECTORY)
		switch {
		case isNotExist(err):
			return -1, nil
		case errors.Is(err, unix.EXDEV):
			return -1, mountError("remove", ch.path(e.name))
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			isDir = false // replaced by a symlink or a file: remove that
			continue
		case err != nil:
			return -1, sysError("open", ch.path(e.name), err)
		}
		return cfd, nil
	}
	return -1, codederr.Errorf(codes.Aborted, nil, "remove %s: it keeps changing while being removed", ch.path(e.name))
}

func (w *walker) isDirAt(fd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
}

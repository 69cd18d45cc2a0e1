//go:build linux

package fstree

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/codederr"
	"github.com/csikit/csikit/internal/mountpoint"
)

// ctxEvery is how many entries a walk handles between context checks.
const ctxEvery = 64

// dirent is one directory entry as getdents64 reports it.
type dirent struct {
	name string
	typ  uint8 // DT_* from linux/dirent.h; DT_UNKNOWN on some file systems
}

// walker holds what one walk shares: a getdents buffer, whether openat2
// is available, and a counter for context checks.
type walker struct {
	ctx       context.Context
	buf       []byte
	noOpenat2 bool
	n         int
}

// dirBufSize is the getdents buffer of a walk: a few hundred entries a
// call.
const dirBufSize = 32 * 1024

// dirBufs recycles getdents buffers between walks: removing an empty
// directory would otherwise spend more on allocating and clearing its
// buffer than on its system calls.
var dirBufs = sync.Pool{New: func() any { return new([dirBufSize]byte) }}

// newWalker starts a walk; release hands its buffer back when it is done.
func newWalker(ctx context.Context) *walker {
	return &walker{ctx: ctx, buf: dirBufs.Get().(*[dirBufSize]byte)[:]}
}

// release returns the walk's buffer for reuse; the walker must not be
// used afterwards. A walker never released only costs garbage.
func (w *walker) release() {
	if w.buf != nil {
		dirBufs.Put((*[dirBufSize]byte)(w.buf))
		w.buf = nil
	}
}

// tick checks the context every ctxEvery calls; name is the entry of the
// chain's deepest directory the walk is at.
func (w *walker) tick(ch *chain, name string) error {
	w.n++
	if w.n%ctxEvery != 0 {
		return nil
	}
	if err := w.ctx.Err(); err != nil {
		return codederr.FromContext(err, "walk stopped at %s", ch.path(name))
	}
	return nil
}

// readDir returns every entry of the directory open at fd except "." and
// "..", read with getdents64 (never by path).
func (w *walker) readDir(fd int) ([]dirent, error) {
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil, err
	}
	var out []dirent
	for {
		n, err := unix.Getdents(fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(w.buf[off+16:]))
			if reclen == 0 || off+reclen > n {
				break
			}
			typ := w.buf[off+18]
			name := w.buf[off+19 : off+reclen]
			if i := indexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			off += reclen
			if s := string(name); s != "." && s != ".." {
				out = append(out, dirent{name: s, typ: typ})
			}
		}
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// openAt opens name (one path component) relative to the directory dirfd
// without following a symlink and without crossing into another mount:
// openat2 with RESOLVE_NO_SYMLINKS|RESOLVE_NO_XDEV and O_NOFOLLOW, so a
// mount point gives EXDEV and a symlink ELOOP (or, with O_PATH, a
// descriptor of the symlink itself). name comes from getdents: one
// component, never "." or "..", so the result is always a child of dirfd.
// RESOLVE_BENEATH would add nothing for one component, and it is left out
// on purpose: when a concurrent rename moves the entry out of dirfd just
// after the lookup, the kernel's final scope check fails with EXDEV, which
// would read as a mount. On kernels without openat2 (before
// 5.6) it uses openat with O_NOFOLLOW and reports EXDEV for a mount root
// found by statx, or by a device number other than the parent's.
func (w *walker) openAt(dirfd int, name string, flags int) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !w.noOpenat2 {
		how := unix.OpenHow{
			Flags:   uint64(flags),
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS,
		}
		for try := 0; ; try++ {
			fd, err := unix.Openat2(dirfd, name, &how)
			if (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)) && try < 16 {
				continue // a concurrent rename somewhere; the kernel asks to retry
			}
			if errors.Is(err, unix.ENOSYS) {
				w.noOpenat2 = true
				break
			}
			return fd, err
		}
	}
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err != nil {
		return -1, err
	}
	if mnt, err := isMountRootFd(fd, dirfd); err != nil || mnt {
		unix.Close(fd)
		if err == nil {
			err = unix.EXDEV
		}
		return -1, err
	}
	return fd, nil
}

// isMountRootFd is the fallback mount check for kernels without openat2.
func isMountRootFd(fd, parent int) (bool, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE, &stx); err == nil &&
		stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		return false, err
	}
	if err := unix.Fstat(parent, &b); err != nil {
		return false, err
	}
	return a.Dev != b.Dev, nil
}

// openRoot opens the root of a walk: a directory whose last component must
// not be a symlink. The caller closes it.
func openRoot(path string) (int, error) {
	return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// mountBelow returns the path of a mount point strictly below the
// directory open at fd, whose path is dir, or "" when there is none, so a
// walk can refuse before it touches anything. It walks the tree by
// descriptor as the removal and copy walks do: statx on each entry reports
// STATX_ATTR_MOUNT_ROOT (a file bind-mounted into the tree is found as well
// as a directory), and directories are entered only through openAt, which
// refuses symlinks and mount points. Its cost grows with the tree, not with
// the host's mount table: an empty directory costs one getdents, where
// reading /proc/self/mountinfo on a node with many pods costs a line per
// mount. On kernels before 5.8, whose statx lacks the attribute, it falls
// back to mountsBelow.
// It also tells whether the directory itself was empty, which spares
// Remove a second read of an empty directory.
func (w *walker) mountBelow(fd int, dir string) (mnt string, empty bool, err error) {
	mnt, empty, err = w.scanMounts(fd, dir)
	if errors.Is(err, errNoMountAttr) {
		mounts, err := mountsBelow(dir)
		if err != nil || len(mounts) == 0 {
			return "", false, err
		}
		return mounts[0], false, nil
	}
	return mnt, empty, err
}

// errNoMountAttr says statx does not report STATX_ATTR_MOUNT_ROOT here.
var errNoMountAttr = errors.New("statx reports no mount-root attribute")

func (w *walker) scanMounts(fd int, path string) (mnt string, empty bool, err error) {
	ents, err := w.readDir(fd)
	if err != nil || len(ents) == 0 {
		return "", err == nil, err
	}
	// Depth first with a stack of its own, not the goroutine's: a tree may
	// be deeper than any stack.
	ch := newChain(w, path, fd)
	defer ch.close()
	type frame struct {
		ents []dirent
		i    int
	}
	stack := []frame{{ents: ents}}
	for {
		f := &stack[len(stack)-1]
		if f.i == len(f.ents) {
			if len(stack) == 1 {
				return "", false, nil
			}
			stack = stack[:len(stack)-1]
			if err := ch.pop(); err != nil {
				return "", false, err
			}
			continue
		}
		e := f.ents[f.i]
		f.i++
		if err := w.tick(ch, e.name); err != nil {
			return "", false, err
		}
		var stx unix.Statx_t
		flags := unix.AT_SYMLINK_NOFOLLOW | unix.AT_NO_AUTOMOUNT | unix.AT_STATX_DONT_SYNC
		if err := unix.Statx(ch.fd(), e.name, flags, unix.STATX_TYPE, &stx); err != nil {
			if isNotExist(err) {
				continue // removed meanwhile
			}
			return "", false, err
		}
		if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
			return "", false, errNoMountAttr
		}
		if stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 {
			return ch.path(e.name), false, nil
		}
		if stx.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		cfd, err := w.openAt(ch.fd(), e.name, unix.O_RDONLY|unix.O_DIRECTORY)
		switch {
		case errors.Is(err, unix.EXDEV):
			return ch.path(e.name), false, nil // mounted since the statx
		case isNotExist(err), errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
			continue // removed or replaced meanwhile: not a mount
		case err != nil:
			return "", false, err
		}
		cents, err := w.readDir(cfd)
		if err != nil || len(cents) == 0 {
			unix.Close(cfd)
			if err != nil && !isNotExist(err) { // ENOENT: removed meanwhile
				return "", false, err
			}
			continue
		}
		if err := ch.push(e.name, cfd); err != nil {
			return "", false, err
		}
		stack = append(stack, frame{ents: cents})
	}
}

// mountsBelow lists the mount points strictly below dir, from
// /proc/self/mountinfo, as paths below dir. It is mountBelow's fallback on
// kernels before 5.8.
func mountsBelow(dir string) ([]string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	under, err := mountpoint.Under(real)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, mp := range under {
		if rel, ok := strings.CutPrefix(mp, strings.TrimSuffix(real, "/")+"/"); ok {
			out = append(out, filepath.Join(dir, rel))
		}
	}
	return out, nil
}

// mountError is the refusal of a walk that met a mount point.
func mountError(op, mnt string) error {
	return codederr.Errorf(codes.FailedPrecondition, nil,
		"%s: %s is a mount point: unmount it first (nothing below it was touched)", op, mnt)
}

// sysError turns an errno from a walk into a coded error; an error that
// has a code already is returned as it is.
func sysError(op, path string, err error) error {
	if _, ok := err.(*codederr.Error); ok {
		return err
	}
	code := codes.Internal
	switch {
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT), errors.Is(err, unix.EMFILE),
		errors.Is(err, unix.ENFILE), errors.Is(err, unix.ENOMEM):
		code = codes.ResourceExhausted
	case errors.Is(err, fs.ErrPermission), errors.Is(err, unix.EROFS):
		code = codes.PermissionDenied
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return codederr.Errorf(code, err, "%s %s", op, path)
}

// isNotExist reports an entry that vanished while the walk ran.
func isNotExist(err error) bool { return errors.Is(err, unix.ENOENT) }

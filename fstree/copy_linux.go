//go:build linux

package fstree

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/codederr"
)

// copyChunk is the most one copy_file_range call moves, so the context and
// the budget are checked at least this often.
const copyChunk = 8 << 20

// smallCopy is the size up to which data goes through a buffer rather
// than copy_file_range.
const smallCopy = 64 << 10

// copier is one Copy's state.
type copier struct {
	*walker
	opts  CopyOptions
	left  int64 // bytes the budget still allows
	stats CopyStats
	data  []byte // read/write buffer when copy_file_range cannot be used
	noCFR bool
	// dstDev and dstIno identify the destination root, so a destination
	// inside the source is never copied into itself.
	dstDev, dstIno uint64
	// sc and dc are the source and destination directories being copied,
	// from the roots down.
	sc, dc *chain
}

func copyTree(ctx context.Context, src, dst string, opts CopyOptions) (CopyStats, error) {
	if err := ctx.Err(); err != nil {
		return CopyStats{}, codederr.FromContext(err, "copy %s", src)
	}
	sfd, err := openRoot(src)
	switch {
	case isNotExist(err):
		return CopyStats{}, codederr.Errorf(codes.NotFound, err, "copy source %s", src)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return CopyStats{}, codederr.Errorf(codes.InvalidArgument, err, "copy source %s is not a directory", src)
	case err != nil:
		return CopyStats{}, sysError("open", src, err)
	}
	defer unix.Close(sfd)
	scan := newWalker(ctx)
	mnt, _, err := scan.mountBelow(sfd, src)
	scan.release()
	if isNotExist(err) { // removed since it was opened
		return CopyStats{}, codederr.Errorf(codes.NotFound, err, "copy source %s was removed", src)
	} else if err != nil {
		return CopyStats{}, sysError("look for mounts below", src, err)
	} else if mnt != "" {
		return CopyStats{}, mountError("copy "+src, mnt)
	}

	// A dst that does not exist yet is built under a hidden sibling name and
	// renamed into place at the end, so even a crash (SIGKILL) mid-copy
	// never leaves a half copy at dst; the next Copy to dst removes the
	// stale sibling first. An existing empty dst is filled in place.
	work, created := dst, false
	var lst unix.Stat_t
	switch err := unix.Lstat(dst, &lst); {
	case isNotExist(err):
		created, work = true, partialPath(dst)
		if err := remove(context.WithoutCancel(ctx), work, RemoveOptions{}); err != nil {
			return CopyStats{}, err
		}
		if err := unix.Mkdir(work, 0o700); err != nil {
			if isNotExist(err) {
				return CopyStats{}, codederr.Errorf(codes.NotFound, err, "parent of copy destination %s", dst)
			}
			return CopyStats{}, sysError("create", work, err)
		}
	case err != nil:
		return CopyStats{}, sysError("lstat", dst, err)
	case lst.Mode&unix.S_IFMT != unix.S_IFDIR:
		return CopyStats{}, codederr.Errorf(codes.AlreadyExists, nil, "copy destination %s exists and is not a directory", dst)
	}
	dfd, err := openRoot(work)
	if err != nil {
		if !created && (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) {
			return CopyStats{}, codederr.Errorf(codes.AlreadyExists, err, "copy destination %s exists and is not a directory", dst)
		}
		return CopyStats{}, sysError("open", work, err)
	}
	var dst0 unix.Stat_t
	if err := unix.Fstat(dfd, &dst0); err != nil {
		unix.Close(dfd)
		return CopyStats{}, sysError("stat", dst, err)
	}
	c := &copier{walker: newWalker(ctx), opts: opts, left: opts.MaxBytes, dstDev: dst0.Dev, dstIno: dst0.Ino}
	defer c.release()
	if c.left == 0 {
		c.left = math.MaxInt64
	}
	if !created {
		ents, err := c.readDir(dfd)
		if err == nil && len(ents) > 0 {
			err = codederr.Errorf(codes.AlreadyExists, nil, "copy destination %s exists and is not empty", dst)
		}
		if err == nil {
			err = unix.Fchmod(dfd, 0o700)
		}
		if err != nil {
			unix.Close(dfd)
			if _, ok := err.(*codederr.Error); ok {
				return CopyStats{}, err
			}
			return CopyStats{}, sysError("prepare", dst, err)
		}
	}
	c.sc, c.dc = newChain(c.walker, src, sfd), newChain(c.walker, work, dfd)
	err = c.copyDir()
	c.sc.close()
	c.dc.close()
	if err == nil {
		var st unix.Stat_t
		if err = unix.Fstat(sfd, &st); err != nil {
			err = sysError("stat", src, err)
		} else {
			err = c.setAttrs(dfd, "", &st, c.dc, "")
		}
	}
	if err == nil && created {
		// RENAME_NOREPLACE: a dst made by someone else meanwhile stays.
		err = unix.Renameat2(unix.AT_FDCWD, work, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EEXIST) {
			err = codederr.Errorf(codes.AlreadyExists, err, "copy destination %s was created by someone else during the copy", dst)
		} else if err != nil {
			err = sysError("rename into place", dst, err)
		}
	}
	if err == nil {
		c.stats.Dirs++
		unix.Close(dfd)
		return c.stats, nil
	}
	// Undo: remove what was made, with a context of its own so a cancelled
	// copy still cleans up.
	clean := newWalker(context.WithoutCancel(ctx))
	defer clean.release()
	cerr := clean.removeContents(dfd, work)
	unix.Close(dfd)
	if cerr == nil && created {
		if rerr := unix.Rmdir(work); rerr != nil && !isNotExist(rerr) {
			cerr = rerr
		}
	}
	if cerr != nil {
		return CopyStats{}, codederr.Errorf(codeOf(err), err, "copy %s to %s failed, and removing the partial copy failed too (%v)", src, dst, cerr)
	}
	return CopyStats{}, err
}

// codeOf returns the gRPC code of a coded error, or Internal.
func codeOf(err error) codes.Code {
	var ce *codederr.Error
	if errors.As(err, &ce) {
		return ce.GRPCStatus().Code()
	}
	return codes.Internal
}

// copyDir copies the contents of the source chain's deepest directory
// into the destination chain's.
func (c *copier) copyDir() error {
	ents, err := c.readDir(c.sc.fd())
	if err != nil {
		if isNotExist(err) { // removed meanwhile
			return c.vanished("")
		}
		return sysError("read directory", c.sc.path(""), err)
	}
	for _, e := range ents {
		if err := c.tick(c.sc, e.name); err != nil {
			return err
		}
		if err := c.copyEntry(e.name); err != nil {
			return err
		}
	}
	// A directory removed while it was copied has no links left; its
	// entries may have gone before getdents could list them.
	var st unix.Stat_t
	if err := unix.Fstat(c.sc.fd(), &st); err != nil {
		return sysError("stat", c.sc.path(""), err)
	}
	if st.Nlink == 0 {
		return c.vanished("")
	}
	return nil
}

// vanished is what Copy makes of the entry name of the source chain's
// deepest directory (or of that directory, when name is "") having
// vanished during the copy: nothing with CopyOptions.SkipVanished, else
// codes.Aborted naming it.
func (c *copier) vanished(name string) error {
	if c.opts.SkipVanished {
		return nil
	}
	return codederr.Errorf(codes.Aborted, nil,
		"copy %s: %s vanished from the source during the copy (is the source being deleted?): "+
			"retry with a source that is not changing, or set CopyOptions.SkipVanished to copy a live tree",
		c.sc.root, shorten(c.sc.rel(name)))
}

// shorten cuts a path for a message: a tree can be deep enough to make its
// paths megabytes long.
func shorten(p string) string {
	const max = 512
	if len(p) <= max {
		return p
	}
	return p[:max] + "…"
}

// copyEntry copies the entry name of the source chain's deepest directory.
// It opens the entry with O_PATH (which never has side effects, works on
// symlinks and reads nothing) and decides by what that descriptor is, so
// the type cannot change between the check and the copy.
func (c *copier) copyEntry(name string) error {
	sfd, dfd := c.sc.fd(), c.dc.fd()
	pfd, err := c.openAt(sfd, name, unix.O_PATH)
	switch {
	case isNotExist(err):
		return c.vanished(name)
	case errors.Is(err, unix.EXDEV):
		return mountError("copy", c.sc.path(name))
	case err != nil:
		return sysError("open", c.sc.path(name), err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		unix.Close(pfd)
		return sysError("stat", c.sc.path(name), err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		// Only the directory's own descriptor is kept while its contents
		// are copied.
		fd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(pfd)
		if isNotExist(err) {
			return c.vanished(name)
		} else if err != nil {
			return sysError("open", c.sc.path(name), err)
		}
		return c.copySubdir(fd, name, &st)
	}
	defer unix.Close(pfd)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return c.copyFile(pfd, &st, dfd, name)
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(pfd, "", buf)
		if err != nil {
			return sysError("read symlink", c.sc.path(name), err)
		}
		if err := unix.Symlinkat(string(buf[:n]), dfd, name); err != nil {
			return sysError("create symlink", c.dc.path(name), err)
		}
		c.stats.Symlinks++
		return c.setAttrs(dfd, name, &st, c.dc, name)
	case unix.S_IFCHR, unix.S_IFBLK:
		if !c.opts.CopyDevices {
			return codederr.Errorf(codes.FailedPrecondition, nil,
				"copy %s: it is a device node, which is not copied unless CopyOptions.CopyDevices is set", c.sc.path(name))
		}
		fallthrough
	default: // FIFO, socket
		if err := unix.Mknodat(dfd, name, st.Mode&unix.S_IFMT|0o600, int(st.Rdev)); err != nil {
			return sysError("create node", c.dc.path(name), err)
		}
		c.stats.Specials++
		return c.setAttrs(dfd, name, &st, c.dc, name)
	}
}

// copySubdir copies the directory name of the source chain's deepest
// directory, open at fd (which it takes over) with stat st.
func (c *copier) copySubdir(fd int, name string, st *unix.Stat_t) error {
	if st.Dev == c.dstDev && st.Ino == c.dstIno {
		unix.Close(fd)
		return codederr.Errorf(codes.InvalidArgument, nil, "copy: the destination %s is inside the source", c.sc.path(name))
	}
	if c.sc.depth() >= maxCopyDepth {
		unix.Close(fd)
		return codederr.Errorf(codes.FailedPrecondition, nil,
			"copy %s: the source is more than %d directories deep (at %s), deeper than Copy goes",
			c.sc.root, maxCopyDepth, shorten(c.sc.rel(name)))
	}
	if err := c.sc.push(name, fd); err != nil {
		return err
	}
	dfd := c.dc.fd()
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
		return sysError("create", c.dc.path(name), err)
	}
	nfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return sysError("open", c.dc.path(name), err)
	}
	if err := c.dc.push(name, nfd); err != nil {
		return err
	}
	if err := c.copyDir(); err != nil {
		return err
	}
	c.stats.Dirs++
	if err := c.setAttrs(c.dc.fd(), "", st, c.dc, ""); err != nil {
		return err
	}
	if err := c.dc.pop(); err != nil {
		return err
	}
	return c.sc.pop()
}

// copyFile copies the regular file open (O_PATH) at pfd, with stat st, to
// a new file name in dfd (the destination chain's deepest directory).
func (c *copier) copyFile(pfd int, st *unix.Stat_t, dfd int, name string) error {
	// Reopen the very inode the O_PATH descriptor holds for reading; the
	// magic link cannot lead anywhere else.
	in, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return sysError("open", c.sc.path(name), err)
	}
	defer unix.Close(in)
	out, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return sysError("create", c.dc.path(name), err)
	}
	defer unix.Close(out)
	end, err := c.copyData(in, out, st, name)
	if err != nil {
		return err
	}
	// A trailing hole: set the size (as it was when the copy began).
	if end < st.Size {
		if err := unix.Ftruncate(out, st.Size); err != nil {
			return sysError("truncate", c.dc.path(name), err)
		}
	}
	c.stats.Files++
	return c.setAttrs(out, "", st, c.dc, name)
}

// copyData copies the data extents of in (with stat st, taken when the
// copy of this file began) to the same offsets of out, leaving holes
// unwritten, within the byte budget. It returns the end of the last data
// written. A file with as many blocks as bytes has no holes and is copied
// in one go, without asking for its extents. name is the file's name in
// the chains' deepest directories.
func (c *copier) copyData(in, out int, st *unix.Stat_t, name string) (int64, error) {
	if st.Blocks*512 >= st.Size {
		return c.copyRange(in, out, 0, st.Size, name)
	}
	var off, written int64
	for {
		data, err := unix.Seek(in, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return written, nil // no data after off
		}
		var end int64
		if err != nil {
			// No SEEK_DATA support: everything up to the size is data.
			data, end = off, st.Size
		} else if end, err = unix.Seek(in, data, unix.SEEK_HOLE); err != nil {
			return written, sysError("seek", c.sc.path(name), err)
		}
		if end <= data {
			return written, nil
		}
		if written, err = c.copyRange(in, out, data, end, name); err != nil || written < end {
			return written, err // an error, or the file shrank meanwhile
		}
		off = end
	}
}

// copyRange copies [data, end) of in to out within the byte budget and
// returns where it stopped (before end if the file shrank meanwhile).
func (c *copier) copyRange(in, out int, data, end int64, name string) (int64, error) {
	for data < end {
		if err := c.ctx.Err(); err != nil {
			return data, codederr.FromContext(err, "copy stopped at %s", c.sc.path(name))
		}
		n := min(end-data, copyChunk)
		if n > c.left {
			return data, codederr.Errorf(codes.OutOfRange, nil,
				"copy %s: the tree holds more than the %d bytes allowed: give the destination a larger capacity",
				c.sc.path(name), c.opts.MaxBytes)
		}
		done, err := c.move(in, out, data, n)
		if err != nil {
			return data, sysError("copy data to", c.dc.path(name), err)
		}
		if done == 0 {
			return data, nil // the file shrank meanwhile
		}
		data += done
		c.left -= done
		c.stats.Bytes += done
	}
	return data, nil
}

// move copies n bytes at off from in to out, with copy_file_range (no
// copies through user space, reflinks where the file system can) or with
// pread and pwrite for small ranges (two cheap calls beat the splice
// set-up) and where the kernel cannot.
func (c *copier) move(in, out int, off, n int64) (int64, error) {
	if !c.noCFR && n > smallCopy {
		roff, woff := off, off
		done, err := unix.CopyFileRange(in, &roff, out, &woff, int(n), 0)
		switch {
		case err == nil:
			return int64(done), nil
		case errors.Is(err, unix.EXDEV), errors.Is(err, unix.EINVAL), errors.Is(err, unix.EOPNOTSUPP),
			errors.Is(err, unix.ENOSYS):
			c.noCFR = true
		default:
			return 0, err
		}
	}
	if c.data == nil {
		c.data = make([]byte, 1<<20)
	}
	buf := c.data[:min(n, int64(len(c.data)))]
	r, err := unix.Pread(in, buf, off)
	if err != nil || r == 0 {
		return 0, err
	}
	for w := 0; w < r; {
		m, err := unix.Pwrite(out, buf[w:r], off+int64(w))
		if err != nil {
			return 0, err
		}
		w += m
	}
	return int64(r), nil
}

// setAttrs gives the entry at (fd, name) — or fd itself when name is "" —
// the owner, mode and times of st. Owner comes first: chown clears setuid
// and setgid bits. Messages name pname in ch's deepest directory.
func (c *copier) setAttrs(fd int, name string, st *unix.Stat_t, ch *chain, pname string) error {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if err := unix.Fchownat(fd, name, int(st.Uid), int(st.Gid), flags); err != nil {
		return sysError("chown", ch.path(pname), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK { // a symlink's mode means nothing
		var err error
		if name == "" {
			err = unix.Fchmod(fd, st.Mode&0o7777)
		} else {
			err = unix.Fchmodat(fd, name, st.Mode&0o7777, 0)
		}
		if err != nil {
			return sysError("chmod", ch.path(pname), err)
		}
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	if name == "" {
		if err := unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH); err != nil {
			// Older kernels lack AT_EMPTY_PATH for utimensat; futimens does it.
			if err := unix.Futimes(fd, []unix.Timeval{unix.NsecToTimeval(unix.TimespecToNsec(st.Atim)), unix.NsecToTimeval(unix.TimespecToNsec(st.Mtim))}); err != nil {
				return sysError("set times of", ch.path(pname), err)
			}
		}
		return nil
	}
	if err := unix.UtimesNanoAt(fd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return sysError("set times of", ch.path(pname), err)
	}
	return nil
}

// partialPath is where Copy builds a new dst before renaming it into
// place: a hidden sibling.
func partialPath(dst string) string {
	return filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".fstree-partial")
}

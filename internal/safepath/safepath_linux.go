//go:build linux

package safepath

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/codederr"
	"github.com/csikit/csikit/internal/mountpoint"
)

// Open opens path (absolute and clean) with O_PATH without following a
// symlink anywhere in it: in one openat2 call with RESOLVE_NO_SYMLINKS
// where the kernel has it (Linux 5.6+; with create, when the path exists
// or only its last directory is missing), else component by component,
// each opened relative to its parent with O_NOFOLLOW and checked. With
// create, missing directories are made (mode 0750) with mkdirat, relative
// to their parent as well. Mounts on
// the way are entered as usual; the result is the top mount at path.
//
// A symlink gives codes.FailedPrecondition naming it; a missing component
// (without create) unix.ENOENT, which matches fs.ErrNotExist. what names
// the path in messages. A corrupt mount at the last component (ENOTCONN,
// ESTALE, EIO) is returned as is: it cannot be a symlink, and the callers
// replace it.
func Open(what, path string, create bool) (int, error) {
	if fd, ok := openFast(path); ok {
		return fd, nil
	}
	if create && path != "/" {
		if fd, ok := createFast(path); ok {
			return fd, nil
		}
	}
	return openWalk(what, path, create)
}

// createFast is the common case of Open with create: only the last
// component is missing. It opens the parent with openFast and makes the
// directory relative to that descriptor.
func createFast(path string) (int, bool) {
	dir, base := filepath.Split(path)
	pfd, ok := openFast(filepath.Clean(dir))
	if !ok {
		return -1, false
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, base, 0o750); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, false
	}
	return notSymlink(unix.Openat(pfd, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0))
}

// openFast is Open's common case in one openat2 call: RESOLVE_NO_SYMLINKS
// makes the kernel refuse a symlink in any component (and hands back the
// link itself, with O_PATH|O_NOFOLLOW, when it is the last one, which the
// fstat then sees). Anything but a plain success (no openat2 before Linux
// 5.6, a symlink, a missing component, a corrupt mount) goes to openWalk,
// which names the culprit, creates what is missing, or returns a corrupt
// mount as is.
func openFast(path string) (int, bool) {
	return notSymlink(unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS,
	}))
}

// notSymlink passes on a descriptor from an O_PATH|O_NOFOLLOW open that
// fstat can read and that is not a symlink; it closes any other.
func notSymlink(fd int, err error) (int, bool) {
	if err != nil {
		return -1, false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(fd)
		return -1, false
	}
	return fd, true
}

// openWalk opens path a component at a time, each relative to its parent.
func openWalk(what, path string, create bool) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, codederr.Errorf(codes.Internal, err, "open /")
	}
	if path == "/" {
		return fd, nil
	}
	comps := strings.Split(path[1:], "/")
	for i, c := range comps {
		last := i == len(comps)-1
		nfd, err := unix.Openat(fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && create {
			if err := unix.Mkdirat(fd, c, 0o750); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, codederr.Errorf(codes.Internal, err, "create %s", prefix(comps, i))
			}
			nfd, err = unix.Openat(fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		unix.Close(fd)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return -1, err
			}
			return -1, codederr.Errorf(codes.Internal, err, "open %s", prefix(comps, i))
		}
		fd = nfd
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			if last && mountpoint.IsCorrupt(err) {
				return fd, nil
			}
			unix.Close(fd)
			return -1, codederr.Errorf(codes.Internal, err, "stat %s", prefix(comps, i))
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			unix.Close(fd)
			return -1, codederr.Errorf(codes.FailedPrecondition, nil,
				"%s %s: %s is a symlink, which is never followed: use the real path", what, path, prefix(comps, i))
		case !last && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			unix.Close(fd)
			return -1, codederr.Errorf(codes.FailedPrecondition, nil, "%s %s: %s is not a directory", what, path, prefix(comps, i))
		}
	}
	return fd, nil
}

func prefix(comps []string, i int) string { return "/" + strings.Join(comps[:i+1], "/") }

// FdPath is the magic link that names what fd holds, for mount(2): the
// kernel resolves it to exactly that file, whatever the path now says.
func FdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// IsMountRoot reports whether the file open at fd is the root of a mount.
func IsMountRoot(fd int) (bool, error) {
	var stx unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE, &stx)
	if err != nil {
		return false, err
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		// Kernels before 5.8: the proc link names the path; look it up.
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlink(FdPath(fd), buf)
		if err != nil {
			return false, err
		}
		return mountpoint.Is(string(buf[:n]))
	}
	return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

// RemountBind applies flags (MS_BIND|MS_REMOUNT|flags) to the bind mount
// just made at path, reached without following a symlink, after it has
// confirmed from its fstat that the file found there is the one bound: a
// path swapped between the mount and the remount is refused, not changed.
func RemountBind(what, path string, flags uintptr, is func(*unix.Stat_t) bool) error {
	fd, err := Open(what, path, false)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if !is(&st) {
		return errors.New("the bind mount is not at the target after mounting")
	}
	return unix.Mount("", FdPath(fd), "", unix.MS_BIND|unix.MS_REMOUNT|flags, "")
}

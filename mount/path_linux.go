//go:build linux

package mount

import (
	"errors"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/mountpoint"
)

// openPath opens path (absolute and clean) with O_PATH without following a
// symlink anywhere in it: each component is opened relative to its parent
// with O_NOFOLLOW and checked, so a symlinked parent cannot move the result
// somewhere else. With create, missing directories are made (mode 0750)
// with mkdirat, relative to their parent as well. Mounts on the way are
// entered as usual; the result is the top mount at path.
//
// A symlink gives codes.FailedPrecondition naming it; a missing component
// (without create) an error matching fs.ErrNotExist. what names the path in
// messages. A corrupt mount at the last component (ENOTCONN, ...) is
// returned as is: it cannot be a symlink, and the callers replace it.
func openPath(what, path string, create bool) (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, errorf(codes.Internal, err, "open /")
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
				return -1, errorf(codes.Internal, err, "create %s", prefix(comps, i))
			}
			nfd, err = unix.Openat(fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		unix.Close(fd)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				return -1, err
			}
			return -1, errorf(codes.Internal, err, "open %s", prefix(comps, i))
		}
		fd = nfd
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			if last && IsCorruptedMount(err) {
				return fd, nil
			}
			unix.Close(fd)
			return -1, errorf(codes.Internal, err, "stat %s", prefix(comps, i))
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			unix.Close(fd)
			return -1, errorf(codes.FailedPrecondition, nil,
				"%s %s: %s is a symlink, which is never followed: use the real path", what, path, prefix(comps, i))
		case !last && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			unix.Close(fd)
			return -1, errorf(codes.FailedPrecondition, nil, "%s %s: %s is not a directory", what, path, prefix(comps, i))
		}
	}
	return fd, nil
}

func prefix(comps []string, i int) string { return "/" + strings.Join(comps[:i+1], "/") }

// fdPath is the magic link that names what fd holds, for mount(2): the
// kernel resolves it to exactly that file, whatever the path now says.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// isMountRootFd reports whether the file open at fd is the root of a mount.
func isMountRootFd(fd int) (bool, error) {
	var stx unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE, &stx)
	if err != nil {
		return false, err
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		// Kernels before 5.8: the proc link names the path; look it up.
		p, err := readLink(fdPath(fd))
		if err != nil {
			return false, err
		}
		return mountpoint.Is(p)
	}
	return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}

func readLink(p string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlink(p, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// mountFlagsMask are the per-mount flags a repeated Stage or Publish
// compares (relatime and strictatime are left out: the kernel picks one
// by default).
const mountFlagsMask = unix.ST_RDONLY | unix.ST_NOSUID | unix.ST_NODEV | unix.ST_NOEXEC |
	unix.ST_NOATIME | unix.ST_NODIRATIME

// flagNames describes statfs flags for messages.
func flagNames(f int64) string {
	var out []string
	for _, n := range []struct {
		f    int64
		name string
	}{{unix.ST_RDONLY, "ro"}, {unix.ST_NOSUID, "nosuid"}, {unix.ST_NODEV, "nodev"}, {unix.ST_NOEXEC, "noexec"},
		{unix.ST_NOATIME, "noatime"}, {unix.ST_NODIRATIME, "nodiratime"}} {
		if f&n.f != 0 {
			out = append(out, n.name)
		}
	}
	if len(out) == 0 {
		return "(none)"
	}
	return strings.Join(out, ",")
}

// msToST maps MS_* flags to the ST_* flags statfs reports for them.
func msToST(ms uintptr) int64 {
	var st int64
	for m, s := range map[uintptr]int64{
		unix.MS_RDONLY: unix.ST_RDONLY, unix.MS_NOSUID: unix.ST_NOSUID, unix.MS_NODEV: unix.ST_NODEV,
		unix.MS_NOEXEC: unix.ST_NOEXEC, unix.MS_NOATIME: unix.ST_NOATIME, unix.MS_NODIRATIME: unix.ST_NODIRATIME,
	} {
		if ms&m != 0 {
			st |= s
		}
	}
	return st
}

// checkFlags compares the per-mount flags at target with want (ST_*
// flags). exact compares every flag in mountFlagsMask; otherwise only the
// flags in want must be set (mount helpers add defaults of their own), and
// read-only must match either way.
func checkFlags(target string, want int64, exact bool) error {
	var sfs unix.Statfs_t
	if err := unix.Statfs(target, &sfs); err != nil {
		return errorf(codes.Internal, err, "statfs %s", target)
	}
	have := sfs.Flags & mountFlagsMask
	want &= mountFlagsMask
	ok := have == want
	if !exact {
		ok = have&want == want && have&unix.ST_RDONLY == want&unix.ST_RDONLY
	}
	if !ok {
		return errorf(codes.AlreadyExists, nil,
			"%s is already mounted with flags %s, want %s", target, flagNames(have), flagNames(want))
	}
	return nil
}

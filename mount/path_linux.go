//go:build linux

package mount

import (
	"strings"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/safepath"
)

// openPath, fdPath and isMountRootFd are internal/safepath's: paths are
// opened without following any symlink, and mounts made through the
// descriptors found.
var (
	openPath      = safepath.Open
	fdPath        = safepath.FdPath
	isMountRootFd = safepath.IsMountRoot
)

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

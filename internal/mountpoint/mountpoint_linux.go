//go:build linux

package mountpoint

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Is reports whether path is the root of a mount, in O(1) on
// kernels with statx STATX_ATTR_MOUNT_ROOT (5.8+) or openat2 (5.6+). It does
// not follow a final symlink. Errors are *fs.PathError values.
func Is(path string) (bool, error) {
	mnt, sure, err := Statx(path)
	if sure || err != nil {
		return mnt, err
	}
	mnt, sure, err = Openat2(path)
	if sure || err != nil {
		return mnt, err
	}
	return MountInfo(path)
}

// Statx asks statx for STATX_ATTR_MOUNT_ROOT; sure is false on
// kernels before 5.8, which do not report the attribute.
func Statx(path string) (mnt, sure bool, err error) {
	var stx unix.Statx_t
	flags := unix.AT_SYMLINK_NOFOLLOW | unix.AT_NO_AUTOMOUNT | unix.AT_STATX_DONT_SYNC
	if err := unix.Statx(unix.AT_FDCWD, path, flags, unix.STATX_TYPE, &stx); err != nil {
		return false, false, &fs.PathError{Op: "statx", Path: path, Err: err}
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, false, nil
	}
	return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, true, nil
}

// Openat2 opens path's last component relative to its parent with
// RESOLVE_NO_XDEV: EXDEV means crossing into another mount. sure is false on
// kernels before 5.6, which lack openat2.
func Openat2(path string) (mnt, sure bool, err error) {
	if path == "/" {
		return true, true, nil
	}
	dir, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, false, &fs.PathError{Op: "open", Path: filepath.Dir(path), Err: err}
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, filepath.Base(path), &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_XDEV,
	})
	switch {
	case err == nil:
		unix.Close(fd)
		return false, true, nil
	case errors.Is(err, unix.EXDEV):
		return true, true, nil
	case errors.Is(err, unix.ELOOP): // a final symlink is never a mount root
		return false, true, nil
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		return false, false, nil
	}
	return false, false, &fs.PathError{Op: "openat2", Path: path, Err: err}
}

// MountInfo is the slow fallback for kernels older than 5.6: it scans
// /proc/self/mountinfo for path as a mount point.
func MountInfo(path string) (bool, error) {
	mounts, err := List()
	return slices.ContainsFunc(mounts, func(e Entry) bool { return e.Point == path }), err
}

// Entry is one line of /proc/self/mountinfo, the fields the callers use.
type Entry struct {
	// Point is the mount point, unescaped.
	Point string
	// FSType is the file system type, e.g. "ext4".
	FSType string
	// Root is the path, inside its file system, of what is mounted: "/"
	// for a whole file system, the file's path for a bind mount of one
	// file (a device node bound onto a block volume's target: "/loop3").
	Root string
}

// List reads /proc/self/mountinfo, in its order (a mount stacked on a
// path comes after the one below it).
func List() ([]Entry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Entry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		e := Entry{Point: UnescapeOctal(fields[4]), Root: UnescapeOctal(fields[3])}
		if i := slices.Index(fields[5:], "-"); i >= 0 && 5+i+1 < len(fields) {
			e.FSType = fields[5+i+1]
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// Under lists the mount points at dir or below it, read from
// /proc/self/mountinfo, deepest first and, for mounts stacked on one path,
// the top one first: the order to unmount them in. dir is resolved first
// (its parents may be symlinks), and the mount points are returned as the
// kernel names them. A prefix that is not a path component ("/a/bc" for
// "/a/b") does not count.
func Under(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	all, err := List()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range all {
		if e.Point == dir || strings.HasPrefix(e.Point, strings.TrimSuffix(dir, "/")+"/") {
			out = append(out, e.Point)
		}
	}
	slices.Reverse(out) // later lines are mounted later: on top
	slices.SortStableFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return out, nil
}

// UnescapeOctal undoes the \ooo escaping of mountinfo fields.
func UnescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, ok := octal(s[i+1 : i+4]); ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func octal(s string) (byte, bool) {
	if len(s) != 3 {
		return 0, false
	}
	var v int
	for _, c := range s {
		if c < '0' || c > '7' {
			return 0, false
		}
		v = v*8 + int(c-'0')
	}
	return byte(v), v < 256
}

// IsCorrupt reports whether err is what a dead mount returns: a FUSE server
// that went away (ENOTCONN), an NFS handle gone stale (ESTALE), or I/O errors.
func IsCorrupt(err error) bool {
	return errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ESTALE) ||
		errors.Is(err, unix.EIO)
}

//go:build linux

package pathstat

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/csikit/csikit/internal/mountpoint"

	"golang.org/x/sys/unix"
)

// IsMountRoot reports whether path, already described by stx, is the root
// of a mount. It uses STATX_ATTR_MOUNT_ROOT (Linux 5.8+, no extra syscall)
// and falls back to /proc/self/mountinfo on older kernels.
func IsMountRoot(path string, stx *unix.Statx_t) (bool, error) {
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	_, found, err := FindMount(func(m MountEntry) bool { return m.MountPoint == path })
	return found, err
}

// MountEntry is one line of /proc/self/mountinfo, the fields we use.
type MountEntry struct {
	// ID is the mount ID (statx's STATX_MNT_ID).
	ID uint64
	// MountPoint is where it is mounted, unescaped.
	MountPoint string
	// MountOpts are the per-mount options, e.g. "rw,relatime".
	MountOpts string
	// SuperOpts are the superblock options, e.g. "ro,errors=remount-ro".
	SuperOpts string
}

// FindMount returns the last mountinfo entry match accepts (the last one is
// the visible one when mounts are stacked).
func FindMount(match func(MountEntry) bool) (MountEntry, bool, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return MountEntry{}, false, err
	}
	var found MountEntry
	ok := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		m, valid := parseMountInfoLine(sc.Text())
		if valid && match(m) {
			found, ok = m, true
		}
	}
	return found, ok, sc.Err()
}

// parseMountInfoLine parses "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 -
// ext3 /dev/root rw,errors=continue" (proc(5)).
func parseMountInfoLine(line string) (MountEntry, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return MountEntry{}, false
	}
	f := strings.Fields(pre)
	g := strings.Fields(post)
	if len(f) < 6 || len(g) < 3 {
		return MountEntry{}, false
	}
	id, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return MountEntry{}, false
	}
	return MountEntry{
		ID: id, MountPoint: mountpoint.UnescapeOctal(f[4]), MountOpts: f[5], SuperOpts: g[2],
	}, true
}

// HasOption reports whether the comma-separated option list has opt.
func HasOption(list, opt string) bool {
	for o := range strings.SplitSeq(list, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// Statx reads the attributes in mask of path (following symlinks) without
// forcing a network filesystem to revalidate.
func Statx(path string, mask int, stx *unix.Statx_t) error {
	for {
		err := unix.Statx(unix.AT_FDCWD, path, unix.AT_STATX_DONT_SYNC, mask, stx)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// DeviceGone reports whether err from opening a device node means the
// device behind it no longer exists.
func DeviceGone(err error) bool {
	return errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT)
}

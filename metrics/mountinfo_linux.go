//go:build linux

package metrics

import (
	"bufio"
	"bytes"
	"github.com/csikit/csikit/internal/mountpoint"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// isMountRoot reports whether path, already described by stx, is the root
// of a mount. It uses STATX_ATTR_MOUNT_ROOT (Linux 5.8+, no extra syscall)
// and falls back to /proc/self/mountinfo on older kernels.
func isMountRoot(path string, stx *unix.Statx_t) (bool, error) {
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	_, found, err := findMount(func(m mountEntry) bool { return m.mountPoint == path })
	return found, err
}

// mountEntry is one line of /proc/self/mountinfo, the fields we use.
type mountEntry struct {
	id         uint64
	mountPoint string
	mountOpts  string // per-mount options, e.g. "rw,relatime"
	superOpts  string // superblock options, e.g. "ro,errors=remount-ro"
}

// findMount returns the last mountinfo entry match accepts (the last one is
// the visible one when mounts are stacked).
func findMount(match func(mountEntry) bool) (mountEntry, bool, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return mountEntry{}, false, err
	}
	var found mountEntry
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
func parseMountInfoLine(line string) (mountEntry, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return mountEntry{}, false
	}
	f := strings.Fields(pre)
	g := strings.Fields(post)
	if len(f) < 6 || len(g) < 3 {
		return mountEntry{}, false
	}
	id, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return mountEntry{}, false
	}
	return mountEntry{
		id: id, mountPoint: mountpoint.UnescapeOctal(f[4]), mountOpts: f[5], superOpts: g[2],
	}, true
}

// hasOption reports whether the comma-separated option list has opt.
func hasOption(list, opt string) bool {
	for o := range strings.SplitSeq(list, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

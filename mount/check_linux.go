//go:build linux

package mount

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/internal/mountpoint"
)

// IsMountPoint reports whether path is the root of a mount. The answer costs
// one statx call (STATX_ATTR_MOUNT_ROOT, Linux 5.8+) or one openat2 with
// RESOLVE_NO_XDEV (5.6+), however many mounts the node has; only older
// kernels fall back to scanning /proc/self/mountinfo. Unlike a comparison of
// device numbers with the parent it also sees bind mounts within one file
// system. A final symlink is not followed. A missing path gives an error
// satisfying errors.Is(err, fs.ErrNotExist); a corrupt mount may give one
// for which IsCorruptedMount reports true.
func (m *Mounter) IsMountPoint(ctx context.Context, path string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return mountpoint.Is(path)
}

// IsCorruptedMount reports whether err is what a dead mount returns: a FUSE
// server that went away (ENOTCONN), an NFS handle gone stale (ESTALE), or an
// I/O error (EIO). Unpublish and Unstage clean such mounts up.
func IsCorruptedMount(err error) bool {
	return errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ESTALE) ||
		errors.Is(err, unix.EIO)
}

//go:build linux

package metrics

import (
	"errors"

	"github.com/csikit/csikit/block"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func (c StatsConfig) volumeStats(path string) (volStats, error) {
	var stx unix.Statx_t
	if err := statx(path, unix.STATX_TYPE, &stx); err != nil {
		return volStats{}, pathStatus(path, err)
	}
	switch uint32(stx.Mode) & unix.S_IFMT {
	case unix.S_IFBLK:
		size, err := block.DeviceSize(path)
		if err != nil {
			if deviceGone(err) {
				return volStats{}, status.Errorf(codes.NotFound, "volume_path %q: the block device is gone: %v", path, err)
			}
			return volStats{}, status.Errorf(codes.Internal, "volume_path %q: reading the block device size: %v", path, err)
		}
		return volStats{resp: blockUsage(size), block: true}, nil
	case unix.S_IFDIR:
		if !c.AllowUnmounted {
			mounted, err := isMountRoot(path, &stx)
			if err != nil {
				return volStats{}, status.Errorf(codes.Internal, "volume_path %q: checking for a mount point: %v", path, err)
			}
			if !mounted {
				return volStats{}, status.Errorf(codes.NotFound, "volume_path %q is not a mount point: the volume is not mounted there (NodeGetVolumeHealth reports why)", path)
			}
		}
		var st unix.Statfs_t
		if err := unix.Statfs(path, &st); err != nil {
			return volStats{}, pathStatus(path, err)
		}
		frsize := uint64(st.Frsize)
		if frsize == 0 {
			frsize = uint64(st.Bsize)
		}
		return volStats{resp: fsUsage(st.Blocks, st.Bfree, st.Bavail, st.Files, st.Ffree, frsize)}, nil
	default:
		return volStats{}, status.Errorf(codes.NotFound, "volume_path %q is neither a directory nor a block device (mode %#o): no volume is published there", path, stx.Mode&unix.S_IFMT)
	}
}

// statx reads the attributes in mask of path (following symlinks) without
// forcing a network filesystem to revalidate.
func statx(path string, mask int, stx *unix.Statx_t) error {
	for {
		err := unix.Statx(unix.AT_FDCWD, path, unix.AT_STATX_DONT_SYNC, mask, stx)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// pathStatus maps a syscall error on a request path to a gRPC status.
func pathStatus(path string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return status.Errorf(codes.NotFound, "volume_path %q does not exist", path)
	case errors.Is(err, unix.ENAMETOOLONG):
		return status.Errorf(codes.InvalidArgument, "volume_path %q: %v", path, err)
	default:
		return status.Errorf(codes.Internal, "volume_path %q: %v", path, err)
	}
}

// deviceGone reports whether err from opening a device node means the
// device behind it no longer exists.
func deviceGone(err error) bool {
	return errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT)
}

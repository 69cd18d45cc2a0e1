//go:build linux

package stats

import (
	"errors"

	"github.com/csikit/csikit/internal/pathstat"

	"github.com/csikit/csikit/block"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Read is VolumeStats without the context bound, for a caller that bounds
// it in its own goroutine (the per-volume metrics collector). path must be
// clean and absolute. It may block as long as the kernel does.
func (c Config) Read(path string) (Result, error) {
	var stx unix.Statx_t
	if err := pathstat.Statx(path, unix.STATX_TYPE, &stx); err != nil {
		return Result{}, pathStatus(path, err)
	}
	switch uint32(stx.Mode) & unix.S_IFMT {
	case unix.S_IFBLK:
		size, err := block.DeviceSize(path)
		if err != nil {
			if pathstat.DeviceGone(err) {
				return Result{}, status.Errorf(codes.NotFound, "volume_path %q: the block device is gone: %v", path, err)
			}
			return Result{}, status.Errorf(codes.Internal, "volume_path %q: reading the block device size: %v", path, err)
		}
		return Result{Response: blockUsage(size), Block: true}, nil
	case unix.S_IFDIR:
		if !c.AllowUnmounted {
			mounted, err := pathstat.IsMountRoot(path, &stx)
			if err != nil {
				return Result{}, status.Errorf(codes.Internal, "volume_path %q: checking for a mount point: %v", path, err)
			}
			if !mounted {
				return Result{}, status.Errorf(codes.NotFound, "volume_path %q is not a mount point: the volume is not mounted there (NodeGetVolumeHealth reports why)", path)
			}
		}
		var st unix.Statfs_t
		if err := unix.Statfs(path, &st); err != nil {
			return Result{}, pathStatus(path, err)
		}
		frsize := uint64(st.Frsize)
		if frsize == 0 {
			frsize = uint64(st.Bsize)
		}
		return Result{Response: fsUsage(st.Blocks, st.Bfree, st.Bavail, st.Files, st.Ffree, frsize)}, nil
	default:
		return Result{}, status.Errorf(codes.NotFound, "volume_path %q is neither a directory nor a block device (mode %#o): no volume is published there", path, stx.Mode&unix.S_IFMT)
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

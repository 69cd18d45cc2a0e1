package stats

import (
	"context"
	"math"

	"github.com/csikit/csikit/internal/pathstat"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// Config configures how VolumeStats reads a volume. The zero value is
// the strict default; VolumeStats(ctx, path) is Config{}.VolumeStats.
type Config struct {
	// AllowUnmounted reports statfs of a directory that is not a mount
	// point instead of refusing it with NotFound. Only drivers whose volumes
	// are plain directories (hostpath-style, no mount of their own) want
	// this; for everyone else such a directory means the volume is not
	// there and statfs would describe the filesystem underneath.
	AllowUnmounted bool
}

// VolumeStats answers NodeGetVolumeStats for the volume at path (a
// published or staged path) using Config{}: see Config.VolumeStats.
func VolumeStats(ctx context.Context, path string) (*csi.NodeGetVolumeStatsResponse, error) {
	return Config{}.VolumeStats(ctx, path)
}

// VolumeStats answers NodeGetVolumeStats for the volume at path, telling
// block from filesystem volumes itself:
//
//   - a block device node (a published raw block volume) reports its size
//     in BYTES, read with BLKGETSIZE64, as total only (the spec lets used
//     and available be omitted for block volumes);
//   - a mounted directory reports statfs: BYTES total/available/used and,
//     when the filesystem has an inode table, INODES total/free/used
//     (available is the space an unprivileged writer can use, used counts
//     reserved blocks too, as df does).
//
// Errors, all gRPC statuses: InvalidArgument for an empty, relative or
// over-long path; NotFound when nothing is at path, when the device behind
// it is gone, or when it is neither a block device nor a mount point (see
// Config.AllowUnmounted); the context's code when ctx ends first;
// Internal otherwise. It costs two syscalls (statx, then statfs or the
// device's open+ioctl+close) and, when ctx can end, one goroutine.
func (c Config) VolumeStats(ctx context.Context, path string) (*csi.NodeGetVolumeStatsResponse, error) {
	p, err := pathstat.CleanPath("volume_path", path)
	if err != nil {
		return nil, err
	}
	s, err := pathstat.Bounded(ctx, func() (Result, error) { return c.Read(p) })
	return s.Response, err
}

// Result is a volume's usage and whether it is a raw block volume.
type Result struct {
	// Response is the NodeGetVolumeStats answer.
	Response *csi.NodeGetVolumeStatsResponse
	// Block is set for a raw block volume (its usage has a total only).
	Block bool
}

// fsUsage builds the response for statfs figures, in units of frsize.
func fsUsage(blocks, bfree, bavail, files, ffree, frsize uint64) *csi.NodeGetVolumeStatsResponse {
	used := uint64(0)
	if blocks > bfree {
		used = blocks - bfree
	}
	resp := &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{
		Unit:      csi.VolumeUsage_BYTES,
		Total:     mulClamp(blocks, frsize),
		Available: mulClamp(bavail, frsize),
		Used:      mulClamp(used, frsize),
	}}}
	if files > 0 { // 0 means the filesystem has no fixed inode table (btrfs, some FUSE)
		iused := uint64(0)
		if files > ffree {
			iused = files - ffree
		}
		resp.Usage = append(resp.Usage, &csi.VolumeUsage{
			Unit:      csi.VolumeUsage_INODES,
			Total:     clamp(files),
			Available: clamp(ffree),
			Used:      clamp(iused),
		})
	}
	return resp
}

// blockUsage builds the response for a raw block device of size bytes.
func blockUsage(size int64) *csi.NodeGetVolumeStatsResponse {
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{
		Unit: csi.VolumeUsage_BYTES, Total: max(size, 0),
	}}}
}

func clamp(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}

func mulClamp(a, b uint64) int64 {
	if a != 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return clamp(a * b)
}

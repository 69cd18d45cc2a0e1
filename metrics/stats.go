package metrics

import (
	"context"
	"math"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// StatsConfig configures how VolumeStats reads a volume. The zero value is
// the strict default; VolumeStats(ctx, path) is StatsConfig{}.VolumeStats.
type StatsConfig struct {
	// AllowUnmounted reports statfs of a directory that is not a mount
	// point instead of refusing it with NotFound. Only drivers whose volumes
	// are plain directories (hostpath-style, no mount of their own) want
	// this; for everyone else such a directory means the volume is not
	// there and statfs would describe the filesystem underneath.
	AllowUnmounted bool
}

// VolumeStats answers NodeGetVolumeStats for the volume at path (a
// published or staged path) using StatsConfig{}: see StatsConfig.VolumeStats.
func VolumeStats(ctx context.Context, path string) (*csi.NodeGetVolumeStatsResponse, error) {
	return StatsConfig{}.VolumeStats(ctx, path)
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
// StatsConfig.AllowUnmounted); the context's code when ctx ends first;
// Internal otherwise. It costs two syscalls (statx, then statfs or the
// device's open+ioctl+close) and, when ctx can end, one goroutine.
func (c StatsConfig) VolumeStats(ctx context.Context, path string) (*csi.NodeGetVolumeStatsResponse, error) {
	p, err := cleanPath("volume_path", path)
	if err != nil {
		return nil, err
	}
	s, err := bounded(ctx, func() (volStats, error) { return c.volumeStats(p) })
	return s.resp, err
}

// volStats is a volume's usage and whether it is a raw block volume.
type volStats struct {
	resp  *csi.NodeGetVolumeStatsResponse
	block bool
}

// cleanPath checks a path taken from a request: it must be absolute and
// free of NUL bytes. The result is lexically cleaned.
func cleanPath(field, path string) (string, error) {
	switch {
	case path == "":
		return "", status.Errorf(codes.InvalidArgument, "%s is empty: want the absolute path the volume was staged or published at", field)
	case strings.IndexByte(path, 0) >= 0:
		return "", status.Errorf(codes.InvalidArgument, "%s contains a NUL byte", field)
	case !filepath.IsAbs(path):
		return "", status.Errorf(codes.InvalidArgument, "%s %q is relative: want an absolute path", field, path)
	}
	return filepath.Clean(path), nil
}

// bounded runs f, returning early with the context's status when ctx ends
// first. The goroutine running f then finishes on its own when f returns
// (a syscall stuck in the kernel cannot be interrupted from Go).
func bounded[T any](ctx context.Context, f func() (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, status.FromContextError(err).Err()
	}
	if ctx.Done() == nil { // cannot end: no need for a goroutine
		return f()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return zero, status.FromContextError(ctx.Err()).Err()
	}
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

//go:build !linux

package block

import (
	"context"

	"google.golang.org/grpc/codes"
)

// MountOptions says which device MountBlock binds onto which target file.
type MountOptions struct {
	// Device is the block device node to publish.
	Device string
	// Target is the file the device node is bound onto.
	Target string
	// ReadOnly makes the bind mount read-only.
	ReadOnly bool
}

// LoopOptions configures a loop device attached by AttachLoop.
type LoopOptions struct {
	// ReadOnly attaches the device read-only.
	ReadOnly bool
	// DirectIO bypasses the page cache of the backing file.
	DirectIO bool
	// AutoClear detaches the device when its last user closes it.
	AutoClear bool
	// Offset is where in the backing file the device starts.
	Offset int64
	// SizeLimit is the device's size; 0 means up to the file's end.
	SizeLimit int64
}

func unsupported() error {
	return errorf(codes.Unimplemented, nil, "block devices are supported on Linux only")
}

// DeviceSize is implemented on Linux only.
func DeviceSize(path string) (int64, error) { return 0, unsupported() }

// EnsureBlock is implemented on Linux only.
func EnsureBlock(ctx context.Context, target string) error { return unsupported() }

// MountBlock is implemented on Linux only.
func MountBlock(ctx context.Context, opts MountOptions) error { return unsupported() }

// UnmountBlock is implemented on Linux only.
func UnmountBlock(ctx context.Context, target string) error { return unsupported() }

// AttachLoop is implemented on Linux only.
func AttachLoop(ctx context.Context, backingFile string, opts LoopOptions) (string, error) {
	return "", unsupported()
}

// FindLoop is implemented on Linux only.
func FindLoop(ctx context.Context, backingFile string) (string, bool, error) {
	return "", false, unsupported()
}

// FindLoopAt is implemented on Linux only.
func FindLoopAt(ctx context.Context, backingFile string, offset, sizeLimit int64) (string, bool, error) {
	return "", false, unsupported()
}

// DetachLoop is implemented on Linux only.
func DetachLoop(ctx context.Context, dev string) error { return unsupported() }

// RefreshLoopSize is implemented on Linux only.
func RefreshLoopSize(ctx context.Context, dev string) error { return unsupported() }

// SectorSize is the alignment ZeroRange requires of offsets and lengths.
const SectorSize = 512

// ZeroRange is implemented on Linux only.
func ZeroRange(ctx context.Context, path string, offset, length int64) error { return unsupported() }

// DefaultCopyChunk is CopyOptions.ChunkSize's default.
const DefaultCopyChunk = 1 << 20

// CopyOptions configures CopySparse.
type CopyOptions struct {
	// ChunkSize is the unit read, tested for zeros and written.
	ChunkSize int
	// DestinationZeroed promises the destination already reads as zeros.
	DestinationZeroed bool
}

// CopyResult says what CopySparse did.
type CopyResult struct {
	// Size is the source's size.
	Size int64
	// Written is how many bytes were copied as data.
	Written int64
}

// CopySparse is implemented on Linux only.
func CopySparse(ctx context.Context, dst, src string, opts CopyOptions) (CopyResult, error) {
	return CopyResult{}, unsupported()
}

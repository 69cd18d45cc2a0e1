//go:build !linux

package mount

import (
	"context"

	"google.golang.org/grpc/codes"
)

func unsupported() error {
	return errorf(codes.Unimplemented, nil, "node mounts are supported on Linux only")
}

// Stage is implemented on Linux only.
func (m *Mounter) Stage(ctx context.Context, o StageOptions) error { return unsupported() }

// Publish is implemented on Linux only.
func (m *Mounter) Publish(ctx context.Context, o PublishOptions) error { return unsupported() }

// Unpublish is implemented on Linux only.
func (m *Mounter) Unpublish(ctx context.Context, target string, opts UnmountOptions) error {
	return unsupported()
}

// Unstage is implemented on Linux only.
func (m *Mounter) Unstage(ctx context.Context, target string, opts UnmountOptions) error {
	return unsupported()
}

// IsMountPoint is implemented on Linux only.
func (m *Mounter) IsMountPoint(ctx context.Context, path string) (bool, error) {
	return false, unsupported()
}

// IsCorruptedMount is implemented on Linux only; elsewhere it reports false.
func IsCorruptedMount(err error) bool { return false }

// DiskFormat is implemented on Linux only.
func (m *Mounter) DiskFormat(ctx context.Context, device string) (string, error) {
	return "", unsupported()
}

// Resize is implemented on Linux only.
func (m *Mounter) Resize(ctx context.Context, o ResizeOptions) (bool, error) {
	return false, unsupported()
}

// GrowOffline is implemented on Linux only.
func (m *Mounter) GrowOffline(ctx context.Context, o GrowOfflineOptions) (GrowOfflineResult, error) {
	return GrowOfflineResult{}, unsupported()
}

// MinSize is not supported on this platform.
func (m *Mounter) MinSize(ctx context.Context, fsType string) (int64, error) {
	return 0, unsupported()
}

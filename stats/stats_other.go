//go:build !linux

package stats

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Read is VolumeStats without the context bound, for a caller that bounds
// it in its own goroutine (the per-volume metrics collector). path must be
// clean and absolute. It may block as long as the kernel does.
func (c Config) Read(path string) (Result, error) {
	return Result{}, status.Error(codes.Unimplemented, "volume stats need Linux")
}

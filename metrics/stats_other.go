//go:build !linux

package metrics

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func (c StatsConfig) volumeStats(path string) (volStats, error) {
	return volStats{}, status.Error(codes.Unimplemented, "volume stats need Linux")
}

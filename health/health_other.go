//go:build !linux

package health

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func pathHealth(path string, checks Check) ([]*csi.VolumeHealth_VolumeHealthEntry, error) {
	return nil, status.Error(codes.Unimplemented, "volume health checks need Linux")
}

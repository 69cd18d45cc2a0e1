package mount

import (
	"sync"

	"google.golang.org/grpc/codes"
)

// minSizes caches MinSize's answers for one Mounter: the installed mkfs
// does not change under a running driver.
type minSizes struct {
	mu    sync.Mutex
	sizes map[string]int64
	busy  map[string]*sync.Mutex
}

// FitSize is the size to create a volume of fsType at, given the
// capacity range's required and limit bytes (0: unset) and the smallest
// size its mkfs formats (Mounter.MinSize): required itself when it is at
// least min, else min when the limit allows it. A limit below min is
// codes.OutOfRange naming the minimum, the answer the CSI spec gives a
// capacity the plugin cannot serve, so the user learns at CreateVolume,
// not at NodeStageVolume, that the volume is too small for its file
// system.
func FitSize(fsType string, required, limit, min int64) (int64, error) {
	if required >= min {
		return required, nil
	}
	if limit > 0 && limit < min {
		return 0, errorf(codes.OutOfRange, nil,
			"a %s file system needs at least %d bytes (the smallest its mkfs formats), more than the capacity range's limit of %d bytes: raise the limit",
			fsType, min, limit)
	}
	return min, nil
}

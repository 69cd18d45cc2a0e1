//go:build linux

package block

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// DeviceSize returns the size in bytes of the block device at path, read
// with the BLKGETSIZE64 ioctl (statfs on a device node reports the size of
// the filesystem holding /dev, not of the device).
func DeviceSize(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var size uint64
	if err := ioctlUint64(int(f.Fd()), unix.BLKGETSIZE64, &size); err != nil {
		return 0, fmt.Errorf("BLKGETSIZE64 %s: %w", path, err)
	}
	return int64(size), nil
}

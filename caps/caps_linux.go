//go:build linux

package caps

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// effective returns this thread's effective capability set as a bit mask.
// Capabilities are per thread, but Go's runtime and this process keep them
// equal on all threads.
func effective() (uint64, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, fmt.Errorf("caps: capget: %w", err)
	}
	return uint64(data[1].Effective)<<32 | uint64(data[0].Effective), nil
}

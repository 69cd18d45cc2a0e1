//go:build linux

package block

import (
	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/internal/mountpoint"
)

// Exported for the black-box tests of each mount-point check method.
var (
	MountRootStatx = mountpoint.Statx
	NoXdevOpenat2  = mountpoint.Openat2
	InMountInfo    = mountpoint.MountInfo
)

// SetZeroOffload turns BLKZEROOUT and fallocate off (false) so the tests
// reach the written-zeros fallback; it returns the undo.
func SetZeroOffload(on bool) (undo func()) {
	old := zeroOffload
	zeroOffload = on
	return func() { zeroOffload = old }
}

// WatchLoopStatus calls seen with each device FindLoopAt asks with
// LOOP_GET_STATUS64, before asking (seen may block, as the ioctl does on
// a hung backing file); it returns the undo.
func WatchLoopStatus(seen func(dev string)) (undo func()) {
	old := loopStatus
	loopStatus = func(dev string) (*unix.LoopInfo64, error) { seen(dev); return old(dev) }
	return func() { loopStatus = old }
}

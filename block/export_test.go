//go:build linux

package block

import "github.com/csikit/csikit/internal/mountpoint"

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

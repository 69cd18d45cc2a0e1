//go:build linux

package block

import "github.com/csikit/csikit/internal/mountpoint"

// Exported for the black-box tests of each mount-point check method.
var (
	MountRootStatx = mountpoint.Statx
	NoXdevOpenat2  = mountpoint.Openat2
	InMountInfo    = mountpoint.MountInfo
)

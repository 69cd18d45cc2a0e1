//go:build linux

package mount

// Exported for the black-box tests of each mount-point check method.
var (
	MountRootStatx = mountRootStatx
	NoXdevOpenat2  = noXdevOpenat2
	InMountInfo    = inMountInfo
)

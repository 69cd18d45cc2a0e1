package driver

import "github.com/ceph/go-ceph/rados"

// SetSweepPause makes the sweep call f after it found the reservation of
// name abandoned and before it claims it (nil: no pause).
func SetSweepPause(f func(name string)) { sweepPause = f }

// ParseVolumeID reports whether s is a volume ID, and its canonical form.
func ParseVolumeID(s string) (string, bool) {
	v, ok := parseVolumeID(s)
	return v.String(), ok
}

// ReadOmap is readOmap: an object's whole omap, or ok=false if it is missing.
var ReadOmap = readOmap

// ReadFenceNodes returns the nodes with a fence/<node> record in access
// object oid (readFences).
func ReadFenceNodes(io *rados.IOContext, oid string) ([]string, error) {
	fences, _, err := readFences(io, oid)
	var nodes []string
	for n := range fences {
		nodes = append(nodes, n)
	}
	return nodes, err
}

// SizesObject is sizesObject: the journal object recording volume sizes.
const SizesObject = sizesObject

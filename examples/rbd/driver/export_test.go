package driver

// SetSweepPause makes the sweep call f after it found the reservation of
// name abandoned and before it claims it (nil: no pause).
func SetSweepPause(f func(name string)) { sweepPause = f }

// ParseVolumeID reports whether s is a volume ID, and its canonical form.
func ParseVolumeID(s string) (string, bool) {
	v, ok := parseVolumeID(s)
	return v.String(), ok
}

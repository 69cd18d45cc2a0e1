package driver

// SetSweepPause makes the sweep call f after it found the reservation of
// name abandoned and before it claims it (nil: no pause).
func SetSweepPause(f func(name string)) { sweepPause = f }

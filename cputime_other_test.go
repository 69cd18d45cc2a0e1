//go:build !unix

package csikit_test

import "time"

// cpuTime is not measured here: the CPU columns of BenchmarkOverhead read 0.
func cpuTime() time.Duration { return 0 }

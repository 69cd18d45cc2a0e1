//go:build !linux

package kvlog

import "os"

// datasync flushes f (a full fsync where fdatasync is not available; on
// macOS os.File.Sync asks the drive to flush its cache too).
func datasync(f *os.File) error { return f.Sync() }

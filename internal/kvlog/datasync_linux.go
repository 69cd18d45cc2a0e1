package kvlog

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data, and only the metadata needed to read it back
// (the file is preallocated, so that is none).
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

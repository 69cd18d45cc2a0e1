//go:build unix

package kvlog

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// errUnsupported is nil where the store works.
var errUnsupported error

var errWouldBlock = unix.EWOULDBLOCK

// tryLock takes an exclusive advisory lock on f without waiting; it fails
// with errWouldBlock if another open file description holds one.
func tryLock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EAGAIN) {
		return errWouldBlock
	}
	return err
}

// mapFile maps f's contents read-only; unmap releases them.
func mapFile(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() == 0 {
		return nil, nil
	}
	if fi.Size() != int64(int(fi.Size())) {
		return nil, fmt.Errorf("file of %d bytes is too large to map", fi.Size())
	}
	return unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
}

func unmap(b []byte) {
	if b != nil {
		_ = unix.Munmap(b)
	}
}

//go:build !unix

package kvlog

import (
	"errors"
	"os"
	"runtime"
)

// errUnsupported: the store relies on advisory locks, renaming over an
// open file and syncing directories, which this platform lacks.
var errUnsupported = errors.New("kvlog: not supported on " + runtime.GOOS + ": use a Linux, macOS or BSD host")

var errWouldBlock = errors.New("would block")

func tryLock(*os.File) error           { return errUnsupported }
func mapFile(*os.File) ([]byte, error) { return nil, errUnsupported }
func unmap([]byte)                     {}

package sanity

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
)

// NodeFS is how the harness touches node paths: it creates the parent of
// every target path and every staging directory (the CO's job in the
// spec), checks that the driver created and removed target paths, and
// reads and writes data through published volumes. LocalFS is the default;
// replace it when the driver sees node paths the test process does not
// (for example a driver in a container with a different mount namespace).
type NodeFS interface {
	// MkdirAll creates a directory and its parents.
	MkdirAll(path string) error
	// RemoveAll removes a directory the harness created. The harness
	// calls it only after checking that no mount is left below path.
	RemoveAll(path string) error
	// Exists reports whether path exists.
	Exists(path string) (bool, error)
	// WriteAt writes data at offset off of the file or block device at
	// path, creating a regular file if needed, and syncs it.
	WriteAt(path string, data []byte, off int64) error
	// ReadAt reads n bytes at offset off of the file or block device at
	// path.
	ReadAt(path string, n int, off int64) ([]byte, error)
	// Capacity returns the size in bytes of the filesystem mounted at
	// path (a directory) or of the block device at path.
	Capacity(path string) (int64, error)
}

// LocalFS is the NodeFS of the test process's own filesystem.
type LocalFS struct{}

// MkdirAll implements NodeFS.
func (LocalFS) MkdirAll(path string) error { return os.MkdirAll(path, 0o750) }

// RemoveAll implements NodeFS.
func (LocalFS) RemoveAll(path string) error { return os.RemoveAll(path) }

// Exists implements NodeFS.
func (LocalFS) Exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// WriteAt implements NodeFS.
func (LocalFS) WriteAt(path string, data []byte, off int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, off); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReadAt implements NodeFS.
func (LocalFS) ReadAt(path string, n int, off int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	got, err := f.ReadAt(b, off)
	if err == io.EOF && got == n {
		err = nil
	}
	return b[:got], err
}

// Capacity implements NodeFS.
func (LocalFS) Capacity(path string) (int64, error) { return capacity(path) }

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}

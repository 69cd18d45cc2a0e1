//go:build linux

package mount

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// Bounds of MinSize's search. A file system that cannot be made on
// minSizeCeiling bytes is reported as unusable rather than searched.
const (
	minSizeStep    = 1 << 20 // MinSize's answer is a whole number of MiB
	minSizeCeiling = 4 << 30
)

// MinSize returns the size, in bytes and a whole number of MiB, of the
// smallest device the installed mkfs.<fsType> will format: xfs 300 MiB
// with xfsprogs 6.x, 1 MiB for ext4 (the search's floor). Minimums change
// between tool versions, so they are found out, not tabulated: the first
// call for a file system type formats sparse, unnamed files in the
// temporary directory (a binary search, about 12 runs of mkfs, well under
// a second of I/O; nothing is left behind even if the process is killed),
// later calls answer from memory. A controller uses it to round a CreateVolume's size up to
// what the node can format (see FitSize), so a small request fails or
// grows at CreateVolume instead of failing at NodeStageVolume.
//
// The answer holds for mkfs with no extra options, as Stage runs it when
// StageOptions.FormatOptions is empty. An fsType that is no file system
// name is codes.InvalidArgument; one whose mkfs is missing or fails even
// on 4 GiB is codes.FailedPrecondition carrying mkfs's error.
func (m *Mounter) MinSize(ctx context.Context, fsType string) (int64, error) {
	if !fsTypePattern.MatchString(fsType) {
		return 0, errorf(codes.InvalidArgument, nil, "file system type %q is not a file system name", fsType)
	}
	c := &m.minSizes
	c.mu.Lock()
	if n, ok := c.sizes[fsType]; ok {
		c.mu.Unlock()
		return n, nil
	}
	if c.busy == nil {
		c.busy, c.sizes = map[string]*sync.Mutex{}, map[string]int64{}
	}
	b := c.busy[fsType]
	if b == nil {
		b = &sync.Mutex{}
		c.busy[fsType] = b
	}
	c.mu.Unlock()

	// One search per type at a time; the others wait for its answer.
	b.Lock()
	defer b.Unlock()
	c.mu.Lock()
	n, ok := c.sizes[fsType]
	c.mu.Unlock()
	if ok {
		return n, nil
	}
	n, err := m.searchMinSize(ctx, fsType)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.sizes[fsType] = n
	c.mu.Unlock()
	m.log.InfoContext(ctx, "found the smallest size mkfs formats", "fsType", fsType, "bytes", n)
	return n, nil
}

// searchMinSize finds the smallest whole number of MiB mkfs.<fsType>
// formats, by bisection between minSizeStep and minSizeCeiling.
//
// Each probe is an unnamed file (O_TMPFILE in the temporary directory)
// that mkfs reaches through /proc/<pid>/fd: a process killed mid-search
// (a driver restarted with SIGKILL while it starts) leaves nothing
// behind, where a named file would stay until someone removed it. A
// temporary directory without O_TMPFILE support gets a named file
// unlinked as soon as it is open.
func (m *Mounter) searchMinSize(ctx context.Context, fsType string) (int64, error) {
	tmp := os.TempDir()
	try := func(size int64) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, ctxError(ctx.Err(), "probe mkfs.%s", fsType)
		}
		// A fresh file each time: mkfs may refuse a device holding a
		// file system, and the last run's must not count.
		f, err := openProbe(tmp, true)
		if err != nil {
			return false, errorf(codes.Internal, err, "make a probe file for mkfs.%s in %s", fsType, tmp)
		}
		defer f.Close()
		if err := f.Truncate(size); err != nil {
			return false, errorf(codes.Internal, err, "size a probe file for mkfs.%s", fsType)
		}
		path := "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(f.Fd()))
		_, err = m.run.Run(ctx, "mkfs."+fsType, mkfsForceArgs(fsType, path)...)
		if ctx.Err() != nil {
			return false, ctxError(ctx.Err(), "probe mkfs.%s", fsType)
		}
		return err == nil, err // a refusal is the answer sought
	}
	ok, err := try(minSizeCeiling)
	if ctx.Err() != nil {
		return 0, err
	}
	if !ok {
		return 0, errorf(codes.FailedPrecondition, err, "mkfs.%s cannot format even %d bytes", fsType, int64(minSizeCeiling))
	}
	// Invariant: hi formats; lo is the largest size known not to (0:
	// none tried).
	lo, hi := int64(0), int64(minSizeCeiling/minSizeStep)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := try(mid * minSizeStep)
		if ctx.Err() != nil {
			return 0, err
		}
		if ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi * minSizeStep, nil
}

// mkfsForceArgs are the arguments that make mkfs.<fsType> format file
// without asking (a probe file is not a block device, and some mkfs ask).
func mkfsForceArgs(fsType, file string) []string {
	switch fsType {
	case "ext2", "ext3", "ext4":
		return []string{"-F", "-q", file}
	case "xfs", "btrfs":
		return []string{"-f", "-q", file}
	}
	return []string{file}
}

// openProbe opens a fresh, empty, unnamed probe file in dir: O_TMPFILE
// where dir's file system has it, else a named file unlinked at once (a
// kill between the two steps is the only way one can stay behind).
func openProbe(dir string, tmpfile bool) (*os.File, error) {
	if tmpfile {
		fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err == nil {
			return os.NewFile(uintptr(fd), ""), nil
		}
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EINVAL) {
			return nil, err
		}
	}
	f, err := os.CreateTemp(dir, ".csikit-minsize-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

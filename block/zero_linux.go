//go:build linux

package block

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// blkZeroOut is BLKZEROOUT, _IO(0x12, 127): zero a byte range of a block
// device, offloaded to the device (WRITE ZEROES) or written by the kernel.
const blkZeroOut = 0x127f

// SectorSize is the alignment ZeroRange requires of offsets and lengths.
const SectorSize = 512

// zeroStep bounds one BLKZEROOUT or fallocate call, so ctx is checked at
// least that often on a large range.
const zeroStep = 256 << 20

// zeroOffload is whether zeroing may use BLKZEROOUT and fallocate before
// writing zeros; tests turn it off to exercise the written fallback.
var zeroOffload = true

// rawTarget is a block device or regular file opened by a helper of this
// package, with its size.
type rawTarget struct {
	f     *os.File
	path  string
	block bool // a block device, else a regular file
	size  int64
	dev   uint64 // st_rdev of a device, st_dev of a file
	ino   uint64
}

// openRaw opens path, a block device or regular file, without following
// a symlink as its last component: it is opened O_PATH|O_NOFOLLOW, its
// type checked on that descriptor, and reopened through /proc/self/fd, so
// a symlink swapped in is refused and never leads to another device. (A
// symlink in a parent directory is followed: /dev/disk/by-id paths are
// for the caller to resolve.) A block device opened for writing is opened
// O_EXCL, which the kernel refuses while a file system is mounted on it.
func openRaw(what, path string, write bool) (*rawTarget, error) {
	if err := checkPath(what, path); err != nil {
		return nil, err
	}
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, errorf(codes.NotFound, err, "%s %s", what, path)
	}
	if err != nil {
		return nil, errorf(codes.Internal, err, "open %s %s", what, path)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, errorf(codes.Internal, err, "stat %s %s", what, path)
	}
	t := &rawTarget{path: path}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		t.block, t.dev = true, st.Rdev
	case unix.S_IFREG:
		t.dev, t.ino, t.size = st.Dev, st.Ino, st.Size
	case unix.S_IFLNK:
		return nil, errorf(codes.FailedPrecondition, nil, "%s %s is a symlink: not followed", what, path)
	default:
		return nil, errorf(codes.InvalidArgument, nil, "%s %s is neither a block device nor a regular file", what, path)
	}
	mode := unix.O_RDONLY
	if write {
		mode = unix.O_WRONLY
		if t.block {
			mode |= unix.O_EXCL
		}
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), mode|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EBUSY) {
		return nil, errorf(codes.FailedPrecondition, err, "%s %s is in use (mounted or held exclusively)", what, path)
	}
	if err != nil {
		return nil, errorf(codes.Internal, err, "open %s %s", what, path)
	}
	t.f = os.NewFile(uintptr(fd), path)
	if t.block {
		var size uint64
		if err := ioctlUint64(fd, unix.BLKGETSIZE64, &size); err != nil {
			t.f.Close()
			return nil, errorf(codes.Internal, err, "size of %s %s", what, path)
		}
		t.size = int64(size)
	}
	return t, nil
}

// ZeroRange makes length bytes of the block device or regular file at
// path, from offset, read back as zeros, and returns once they are on
// stable storage. On a device it asks the kernel (BLKZEROOUT, which
// offloads to the device's WRITE ZEROES or writes zero pages itself); on a
// file it punches a hole (fallocate PUNCH_HOLE, freeing the blocks) or
// zeroes the range (ZERO_RANGE); where neither is supported it writes
// zeros. Bytes outside the range are not touched.
//
// offset and length must be multiples of SectorSize (codes.InvalidArgument)
// and the range must lie within the device or file (codes.OutOfRange,
// naming its size). A symlink as path is refused (codes.FailedPrecondition),
// never followed, and so is a device with a file system mounted on it.
// ctx is checked between steps of at most 256 MiB.
func ZeroRange(ctx context.Context, path string, offset, length int64) error {
	if err := ctx.Err(); err != nil {
		return ctxError(err, "zero %s", path)
	}
	if offset < 0 || length < 0 || offset%SectorSize != 0 || length%SectorSize != 0 {
		return errorf(codes.InvalidArgument, nil,
			"zero %s: offset %d and length %d must be non-negative multiples of %d", path, offset, length, SectorSize)
	}
	t, err := openRaw("device", path, true)
	if err != nil {
		return err
	}
	defer t.f.Close()
	if offset > t.size || length > t.size-offset {
		return errorf(codes.OutOfRange, nil, "zero %s: range [%d, %d) ends past its end (%d bytes)",
			path, offset, offset+length, t.size)
	}
	if err := t.zero(ctx, offset, length); err != nil {
		return err
	}
	if err := t.f.Sync(); err != nil {
		return writeError(err, "zero %s: sync", path)
	}
	return nil
}

// zero makes [off, off+n) of t read back as zeros; see ZeroRange.
func (t *rawTarget) zero(ctx context.Context, off, n int64) error {
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return ctxError(err, "zero %s at offset %d", t.path, off)
		}
		step := min(n, zeroStep)
		if err := t.zeroStep(ctx, off, step); err != nil {
			return err
		}
		off, n = off+step, n-step
	}
	return nil
}

func (t *rawTarget) zeroStep(ctx context.Context, off, n int64) error {
	fd := int(t.f.Fd())
	if zeroOffload {
		var err error
		if t.block {
			r := [2]uint64{uint64(off), uint64(n)}
			_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), blkZeroOut, uintptr(unsafe.Pointer(&r)))
			if errno != 0 {
				err = errno
			}
		} else {
			err = unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
			if unsupported(err) {
				err = unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, n)
			}
		}
		if err == nil {
			return nil
		}
		if !unsupported(err) {
			return writeError(err, "zero %s at offset %d", t.path, off)
		}
	}
	return t.writeZeros(ctx, off, n)
}

// unsupported reports an error that means "not this way": the ioctl or
// fallocate mode is not implemented here, or the range does not suit it
// (a device whose logical blocks are larger than 512 bytes).
func unsupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTTY) ||
		errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS)
}

// zeroChunk is the size of the zero buffer writeZeros writes from.
const zeroChunk = 1 << 20

var zeros = make([]byte, zeroChunk)

func (t *rawTarget) writeZeros(ctx context.Context, off, n int64) error {
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return ctxError(err, "zero %s at offset %d", t.path, off)
		}
		w := min(n, zeroChunk)
		if _, err := t.f.WriteAt(zeros[:w], off); err != nil {
			return writeError(err, "zero %s at offset %d", t.path, off)
		}
		off, n = off+w, n-w
	}
	return nil
}

// writeError codes a failed write: ResourceExhausted for a full file
// system or quota, else Internal.
func writeError(err error, format string, args ...any) error {
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		return errorf(codes.ResourceExhausted, err, "%s", fmt.Sprintf(format, args...))
	}
	return errorf(codes.Internal, err, "%s", fmt.Sprintf(format, args...))
}

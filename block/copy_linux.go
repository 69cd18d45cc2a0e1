//go:build linux

package block

import (
	"bytes"
	"context"
	"errors"
	"io"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// DefaultCopyChunk is CopyOptions.ChunkSize's default.
const DefaultCopyChunk = 1 << 20

// CopyOptions configures CopySparse. The zero value copies in chunks of
// DefaultCopyChunk and zeroes the destination wherever the source has a
// hole.
type CopyOptions struct {
	// ChunkSize is the unit read, tested for zeros and written, in bytes;
	// 0 means DefaultCopyChunk.
	ChunkSize int
	// DestinationZeroed promises that the destination already reads as
	// zeros over the source's size (a new sparse file, a device just
	// zeroed): holes are then skipped instead of zeroed.
	DestinationZeroed bool
}

// CopyResult says what CopySparse did.
type CopyResult struct {
	// Size is the source's size: the bytes of the destination that now
	// equal it.
	Size int64
	// Written is how many of them were copied as data; the rest were
	// holes or all-zero chunks, zeroed (or skipped, with
	// DestinationZeroed) instead.
	Written int64
}

// CopySparse copies the block device or regular file src onto dst, a
// block device or regular file at least as large, keeping holes: where
// the source has a hole (found with SEEK_DATA/SEEK_HOLE on a file) or a
// chunk of only zeros (read from a device, or inside a file's data), the
// destination's range is zeroed the way ZeroRange does it — BLKZEROOUT on
// a device, a punched hole in a file — not written, so a thin or sparse
// destination stays thin and no stale byte of the destination survives.
// The destination beyond the source's size is left untouched. It returns
// once the copy is on stable storage.
//
// Neither path may be a symlink (codes.FailedPrecondition, not followed);
// a destination device with a file system mounted on it is refused the
// same way. A destination smaller than the source gives
// codes.OutOfRange naming both sizes; a full destination file system
// codes.ResourceExhausted. ctx is checked between chunks. On any error the
// destination holds a partial copy and must not be used as one.
func CopySparse(ctx context.Context, dst, src string, opts CopyOptions) (CopyResult, error) {
	if err := ctx.Err(); err != nil {
		return CopyResult{}, ctxError(err, "copy %s to %s", src, dst)
	}
	chunk := opts.ChunkSize
	if chunk <= 0 {
		chunk = DefaultCopyChunk
	}
	s, err := openRaw("source", src, false)
	if err != nil {
		return CopyResult{}, err
	}
	defer s.f.Close()
	d, err := openRaw("destination", dst, true)
	if err != nil {
		return CopyResult{}, err
	}
	defer d.f.Close()
	if s.block == d.block && s.dev == d.dev && s.ino == d.ino {
		return CopyResult{}, errorf(codes.InvalidArgument, nil, "copy %s to %s: source and destination are the same", src, dst)
	}
	if d.size < s.size {
		return CopyResult{}, errorf(codes.OutOfRange, nil,
			"copy %s to %s: the destination (%d bytes) is smaller than the source (%d bytes)", src, dst, d.size, s.size)
	}
	c := sparseCopy{ctx: ctx, s: s, d: d, buf: make([]byte, chunk), zero: zeros, zeroDst: !opts.DestinationZeroed,
		res: CopyResult{Size: s.size}}
	if chunk > len(zeros) {
		c.zero = make([]byte, chunk)
	}
	if err := c.run(); err != nil {
		return c.res, err
	}
	if err := d.f.Sync(); err != nil {
		return c.res, writeError(err, "copy %s to %s: sync the destination", src, dst)
	}
	return c.res, nil
}

// sparseCopy is one CopySparse in progress. hole is the start of a run of
// zeros not yet applied to the destination (-1: none).
type sparseCopy struct {
	ctx     context.Context
	s, d    *rawTarget
	buf     []byte
	zero    []byte // at least len(buf) zeros
	zeroDst bool
	hole    int64
	res     CopyResult
}

func (c *sparseCopy) run() error {
	c.hole = -1
	seek := !c.s.block
	for pos := int64(0); pos < c.s.size; {
		start, end := pos, c.s.size
		if seek {
			var ok bool
			start, end, ok = c.nextData(pos)
			seek = ok
		}
		if start > pos {
			c.zeros(pos)
		}
		if err := c.copyData(start, end); err != nil {
			return err
		}
		pos = end
	}
	return c.flushHole(c.s.size)
}

// nextData finds the next data extent of the source file at or after pos:
// [start, end). ok is false when the file system cannot say (the caller
// then reads everything); a source with no more data gives start = end =
// its size.
func (c *sparseCopy) nextData(pos int64) (start, end int64, ok bool) {
	fd := int(c.s.f.Fd())
	start, err := unix.Seek(fd, pos, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return c.s.size, c.s.size, true
	}
	if err != nil {
		return pos, c.s.size, false
	}
	end, err = unix.Seek(fd, start, unix.SEEK_HOLE)
	if err != nil {
		return pos, c.s.size, false
	}
	return min(start, c.s.size), min(end, c.s.size), true
}

// zeros records that the source reads zero from pos on.
func (c *sparseCopy) zeros(pos int64) {
	if c.hole < 0 {
		c.hole = pos
	}
}

// flushHole applies the pending run of zeros, up to end, to the
// destination.
func (c *sparseCopy) flushHole(end int64) error {
	if c.hole < 0 {
		return nil
	}
	start := c.hole
	c.hole = -1
	if !c.zeroDst || end <= start {
		return nil
	}
	return c.d.zero(c.ctx, start, end-start)
}

func (c *sparseCopy) copyData(start, end int64) error {
	for off := start; off < end; {
		if err := c.ctx.Err(); err != nil {
			return ctxError(err, "copy %s to %s at offset %d", c.s.path, c.d.path, off)
		}
		b := c.buf[:min(int64(len(c.buf)), end-off)]
		if _, err := c.s.f.ReadAt(b, off); err != nil {
			if errors.Is(err, io.EOF) {
				return errorf(codes.Aborted, err, "copy %s to %s: the source shrank below %d bytes while copied", c.s.path, c.d.path, c.s.size)
			}
			return errorf(codes.Internal, err, "copy %s to %s: read at offset %d", c.s.path, c.d.path, off)
		}
		// Only the span from the chunk's first to its last block holding
		// a non-zero byte is written; the zeros around it join the holes.
		lo, hi := dataSpan(b, c.zero)
		if lo == hi {
			c.zeros(off)
		} else {
			if lo > 0 {
				c.zeros(off)
			}
			if err := c.flushHole(off + int64(lo)); err != nil {
				return err
			}
			if _, err := c.d.f.WriteAt(b[lo:hi], off+int64(lo)); err != nil {
				return writeError(err, "copy %s to %s: write at offset %d", c.s.path, c.d.path, off+int64(lo))
			}
			c.res.Written += int64(hi - lo)
			if hi < len(b) {
				c.zeros(off + int64(hi))
			}
		}
		off += int64(len(b))
	}
	return nil
}

// spanBlock is the granularity at which CopySparse trims the zeros around
// a chunk's data: a file system block, a page.
const spanBlock = 4096

// dataSpan returns the span [lo, hi) of b from the first to the end of
// the last spanBlock holding a non-zero byte; lo == hi when b is all
// zeros. zero holds at least len(b) zeros.
func dataSpan(b, zero []byte) (lo, hi int) {
	if bytes.Equal(b, zero[:len(b)]) {
		return 0, 0
	}
	for lo = 0; lo < len(b); lo += spanBlock {
		end := min(lo+spanBlock, len(b))
		if !bytes.Equal(b[lo:end], zero[:end-lo]) {
			break
		}
	}
	for hi = len(b); hi > lo; {
		start := (hi - 1) / spanBlock * spanBlock
		if !bytes.Equal(b[start:hi], zero[:hi-start]) {
			break
		}
		hi = start
	}
	return lo, hi
}

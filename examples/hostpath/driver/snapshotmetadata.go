//go:build linux

package driver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
)

// The SnapshotMetadata service (csikit.SnapshotMetadataReader) for
// image-backed snapshots (block and filesystem volumes): allocated ranges
// come from SEEK_DATA/SEEK_HOLE on the snapshot's image; the delta compares
// two images block by block, skipping what is a hole in both. csikit has
// validated the request and locked the snapshots shared, so they cannot be
// deleted while they are read; images are never written after the
// snapshot is taken.

// metadataBlock is the granularity of the delta: a 4 KiB block that
// differs is reported whole; adjacent ones are merged into one range.
const metadataBlock = 4096

// metadataChunk is how much of both images the delta reads at a time.
const metadataChunk = 256 * metadataBlock

// GetMetadataAllocated reports the data ranges of a snapshot's image.
func (d *Driver) GetMetadataAllocated(ctx context.Context, r *csi.GetMetadataAllocatedRequest, w *csikit.BlockMetadataStream) error {
	x, f, err := d.openSnapshotImage(r.GetSnapshotId())
	if err != nil {
		return err
	}
	defer f.Close()
	if err := w.Begin(csi.BlockMetadataType_VARIABLE_LENGTH, x.Size); err != nil {
		return err
	}
	fd := int(f.Fd())
	for off := w.StartingOffset(); off < x.Size; {
		data, err := seek(fd, off, unix.SEEK_DATA, x.Size)
		if err != nil {
			return status.Errorf(codes.Internal, "snapshot %s: finding data: %v", x.ID, err)
		}
		if data >= x.Size {
			break
		}
		hole, err := seek(fd, data, unix.SEEK_HOLE, x.Size)
		if err != nil {
			return status.Errorf(codes.Internal, "snapshot %s: finding a hole: %v", x.ID, err)
		}
		hole = min(hole, x.Size)
		if err := w.Add(data, hole-data); err != nil {
			return err
		}
		off = hole
	}
	return nil
}

// GetMetadataDelta reports the ranges in which the target snapshot's image
// differs from the base's. Both must be snapshots of the same volume, the
// target taken after the base.
func (d *Driver) GetMetadataDelta(ctx context.Context, r *csi.GetMetadataDeltaRequest, w *csikit.BlockMetadataStream) error {
	base, bf, err := d.openSnapshotImage(r.GetBaseSnapshotId())
	if err != nil {
		return err
	}
	defer bf.Close()
	target, tf, err := d.openSnapshotImage(r.GetTargetSnapshotId())
	if err != nil {
		return err
	}
	defer tf.Close()
	if base.SourceID != target.SourceID {
		return status.Errorf(codes.InvalidArgument, "base snapshot %s is of volume %s, target snapshot %s of volume %s: want two snapshots of one volume",
			base.ID, base.SourceID, target.ID, target.SourceID)
	}
	if target.Created.Before(base.Created) {
		return status.Errorf(codes.InvalidArgument, "target snapshot %s was taken before base snapshot %s: want the later one as target", target.ID, base.ID)
	}
	if err := w.Begin(csi.BlockMetadataType_VARIABLE_LENGTH, target.Size); err != nil {
		return err
	}
	c := deltaScan{w: w, base: bf, target: tf, baseSize: base.Size, size: target.Size,
		bbuf: make([]byte, metadataChunk), tbuf: make([]byte, metadataChunk)}
	if err := c.run(ctx, w.StartingOffset()/metadataBlock*metadataBlock); err != nil {
		return err
	}
	return c.flush()
}

// deltaScan compares two images chunk by chunk and merges changed blocks
// into ranges.
type deltaScan struct {
	w            *csikit.BlockMetadataStream
	base, target *os.File
	baseSize     int64 // bytes of the base image that exist; beyond, zeros
	size         int64 // the target's size: the volume's capacity
	bbuf, tbuf   []byte
	runStart     int64 // the pending range of changed blocks, [runStart, runEnd)
	runEnd       int64
}

func (c *deltaScan) run(ctx context.Context, off int64) error {
	bfd, tfd := int(c.base.Fd()), int(c.target.Fd())
	for off < c.size {
		if err := ctx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		// Skip what is a hole in both images: zeros on both sides.
		bd, err := seek(bfd, off, unix.SEEK_DATA, c.baseSize)
		if err != nil {
			return status.Errorf(codes.Internal, "base image: %v", err)
		}
		if bd >= c.baseSize {
			bd = c.size // no more data in the base
		}
		td, err := seek(tfd, off, unix.SEEK_DATA, c.size)
		if err != nil {
			return status.Errorf(codes.Internal, "target image: %v", err)
		}
		next := min(bd, td) / metadataBlock * metadataBlock
		if next >= c.size {
			return nil
		}
		n := min(int64(metadataChunk), c.size-next)
		if err := c.compare(next, int(n)); err != nil {
			return err
		}
		off = next + n
	}
	return nil
}

// compare reads n bytes at off of both images and records changed blocks.
func (c *deltaScan) compare(off int64, n int) error {
	t := c.tbuf[:n]
	if err := readFull(c.target, t, off, c.size); err != nil {
		return status.Errorf(codes.Internal, "reading the target image: %v", err)
	}
	b := c.bbuf[:n]
	if err := readFull(c.base, b, off, c.baseSize); err != nil {
		return status.Errorf(codes.Internal, "reading the base image: %v", err)
	}
	for i := 0; i < n; i += metadataBlock {
		j := min(i+metadataBlock, n)
		if bytes.Equal(b[i:j], t[i:j]) {
			continue
		}
		start, end := off+int64(i), off+int64(j)
		if c.runEnd == start && c.runEnd > c.runStart {
			c.runEnd = end
			continue
		}
		if err := c.flush(); err != nil {
			return err
		}
		c.runStart, c.runEnd = start, end
	}
	return nil
}

// flush reports the pending range.
func (c *deltaScan) flush() error {
	if c.runEnd <= c.runStart {
		return nil
	}
	err := c.w.Add(c.runStart, c.runEnd-c.runStart)
	c.runStart, c.runEnd = 0, 0
	return err
}

// openSnapshotImage finds an image-backed snapshot and opens its image
// read-only, never through a symlink.
func (d *Driver) openSnapshotImage(id string) (snapshot, *os.File, error) {
	if !validID(id) {
		return snapshot{}, nil, status.Errorf(codes.NotFound, "snapshot %q not found", id)
	}
	x, ok := d.store.snapshot(id)
	if !ok {
		return snapshot{}, nil, status.Errorf(codes.NotFound, "snapshot %s not found", id)
	}
	if x.Kind == kindDir {
		return snapshot{}, nil, status.Errorf(codes.FailedPrecondition,
			"snapshot %s is of a directory volume, which has no blocks: block metadata exists for block and filesystem volumes only", id)
	}
	f, err := os.OpenFile(d.snapshotPath(id, x.Kind), os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, os.ErrNotExist) {
		return snapshot{}, nil, status.Errorf(codes.NotFound, "snapshot %s has no image", id)
	}
	if err != nil {
		return snapshot{}, nil, status.Errorf(codes.Internal, "snapshot %s: %v", id, err)
	}
	return x, f, nil
}

// seek is lseek with SEEK_DATA or SEEK_HOLE that answers end when no data
// (or no hole) follows off.
func seek(fd int, off int64, whence int, end int64) (int64, error) {
	if off >= end {
		return end, nil
	}
	n, err := unix.Seek(fd, off, whence)
	if errors.Is(err, unix.ENXIO) {
		return end, nil
	}
	return n, err
}

// readFull reads len(b) bytes at off; what lies at or beyond size (the
// image's end) reads as zeros.
func readFull(f *os.File, b []byte, off, size int64) error {
	clear(b)
	if off >= size {
		return nil
	}
	want := b[:min(int64(len(b)), size-off)]
	for len(want) > 0 {
		n, err := f.ReadAt(want, off)
		if n == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				return nil // shorter than recorded: zeros
			}
			return err
		}
		want, off = want[n:], off+int64(n)
	}
	return nil
}

//go:build linux

package driver

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/fstree"
)

// createData makes the volume's directory or backing file, filled from src
// when there is one.
func (d *Driver) createData(ctx context.Context, v *volume, src *csi.VolumeContentSource) error {
	from, fromKind, fromSize, err := d.source(src)
	if err != nil {
		return err
	}
	if fromKind != "" {
		if fromKind != v.Kind && (fromKind == kindBlock || v.Kind == kindBlock) {
			return status.Errorf(codes.InvalidArgument, "cannot create a %s volume from a %s source", v.Kind, fromKind)
		}
		if fromKind != v.Kind {
			return status.Errorf(codes.InvalidArgument, "cannot create a %s volume from a %s source: storage kinds differ", v.Kind, fromKind)
		}
		// A backing file is the capacity: a smaller one cannot take the
		// source's. A directory holds what its files hold: the copy itself
		// is bounded by the capacity, in bytes on disk (copyDir).
		if v.Kind != kindDir && fromSize > v.Capacity {
			return status.Errorf(codes.OutOfRange, "source is %d bytes, larger than the requested %d bytes", fromSize, v.Capacity)
		}
		v.Source = sourceRef(src)
	}
	switch v.Kind {
	case kindDir:
		if v.Lazy && from == "" {
			return nil // made at the first stage (materialize)
		}
		v.Lazy = false
		dir := d.volumeDir(v.ID)
		if err := d.makeDir(ctx, v, dir); err != nil {
			return err
		}
		if from != "" {
			// A source volume may be in use (a clone of a live volume);
			// a snapshot must be whole, so one losing files mid-copy (being
			// deleted) fails the restore.
			return copyDir(ctx, from, dir, v.Capacity, src.GetVolume() != nil)
		}
		return nil
	default:
		img := d.volumeImage(v.ID)
		if from != "" {
			if err := copyFile(ctx, from, img); err != nil {
				return err
			}
		} else if err := createSparse(img); err != nil {
			return err
		}
		if err := os.Truncate(img, v.imageSize(v.Capacity)); err != nil {
			return status.Errorf(codes.Internal, "size backing file: %v", err)
		}
		if from != "" && v.Kind == kindFS && v.Capacity > fromSize {
			_, err := d.growExt4Offline(ctx, img)
			return err
		}
		return nil
	}
}

// makeDir makes a directory volume's directory, writable by the pod's
// user, and limits it to the volume's capacity (the limit comes first, so
// a copy into the directory is held to it as the pod's writes will be).
// A directory that exists (an earlier attempt's) is taken as it is.
func (d *Driver) makeDir(ctx context.Context, v *volume, dir string) error {
	if err := os.Mkdir(dir, 0o777); err != nil && !os.IsExist(err) {
		return status.Errorf(codes.Internal, "create volume directory: %v", err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // the pod's user must be able to write
		return status.Errorf(codes.Internal, "create volume directory: %v", err)
	}
	return d.limitDir(ctx, v, dir)
}

// materialize makes a Lazy directory volume's directory, at its first
// stage: made, limited, and its entry flushed to disk before the record
// says the volume has it, so a crash cannot leave a volume marked as
// having a directory it never got. A crash between the two leaves the
// directory with the volume still Lazy; the next stage takes it as it is.
// v must be the volume's current record, read under its lock.
func (d *Driver) materialize(ctx context.Context, v *volume) error {
	if v.Kind != kindDir || !v.Lazy {
		return nil
	}
	if err := d.makeDir(ctx, v, d.volumeDir(v.ID)); err != nil {
		return err
	}
	if err := syncDir(d.volumesRoot()); err != nil {
		return status.Errorf(codes.Internal, "create volume directory: %v", err)
	}
	x := *v
	x.Lazy = false
	if err := d.store.putVolume(ctx, &x); err != nil {
		return status.Errorf(codes.Internal, "record the directory of volume %s: %v", v.ID, err)
	}
	*v = x
	return nil
}

// dirData is where a directory volume's data is, or "" for a Lazy volume
// whose directory is not made (its data is empty).
func (d *Driver) dirData(v *volume) string {
	dir := d.volumeDir(v.ID)
	if v.Lazy && !exists(dir) {
		return ""
	}
	return dir
}

// syncDir flushes a directory's entries to disk.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// source resolves a content source to the path holding its data; the
// path is "" for a source with no data yet (a Lazy volume), whose kind
// and size are still given.
func (d *Driver) source(src *csi.VolumeContentSource) (path string, k kind, size int64, err error) {
	switch {
	case src == nil:
		return "", "", 0, nil
	case src.GetSnapshot() != nil:
		id := src.GetSnapshot().GetSnapshotId()
		x, ok := d.store.snapshot(id)
		if !validID(id) || !ok {
			return "", "", 0, status.Errorf(codes.NotFound, "source snapshot %q does not exist", id)
		}
		return d.snapshotPath(x.ID, x.Kind), x.Kind, x.Size, nil
	case src.GetVolume() != nil:
		id := src.GetVolume().GetVolumeId()
		v, ok := d.store.volume(id)
		if !validID(id) || !ok {
			return "", "", 0, status.Errorf(codes.NotFound, "source volume %q does not exist", id)
		}
		if v.Kind == kindDir {
			return d.dirData(&v), v.Kind, v.Capacity, nil
		}
		return d.volumeImage(v.ID), v.Kind, v.Capacity, nil
	}
	return "", "", 0, status.Error(codes.InvalidArgument, "volume_content_source names neither a snapshot nor a volume")
}

func sourceRef(src *csi.VolumeContentSource) string {
	if s := src.GetSnapshot(); s != nil {
		return "snapshot:" + s.GetSnapshotId()
	}
	return "volume:" + src.GetVolume().GetVolumeId()
}

// removeData deletes the volume's data. A directory is removed with
// fstree.Remove: no symlink below it is followed and no mount below it is
// crossed — a mount at or below it (a stale bind from a crash) makes it
// refuse with FailedPrecondition naming the mount, and nothing is removed.
// Missing data is success.
func (d *Driver) removeData(ctx context.Context, v *volume) error {
	if v.Kind == kindDir {
		if err := fstree.Remove(ctx, d.volumeDir(v.ID), fstree.RemoveOptions{}); err != nil {
			return status.Errorf(status.Code(err), "remove the data of volume %s: %v", v.ID, err)
		}
		d.unlimitDir(ctx, v)
		return nil
	}
	if err := os.Remove(d.volumeImage(v.ID)); err != nil && !errNotExist(err) {
		return status.Errorf(codes.Internal, "remove the backing file of volume %s: %v", v.ID, err)
	}
	return nil
}

// discardData removes the data of a create that failed; what cannot be
// removed is logged (the sweep retries once the reservation is abandoned).
func (d *Driver) discardData(v *volume) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.removeData(ctx, v); err != nil {
		d.log.Warn("could not remove the data of a failed create", "volume", v.ID, "error", err)
	}
}

// removeLeftovers removes what an earlier attempt at creating volume id
// left (a crash mid-copy): the ID is reserved to this create, so whatever
// is at its paths is its own half-made data.
func (d *Driver) removeLeftovers(ctx context.Context, id string) error {
	for _, k := range []kind{kindDir, kindBlock} {
		v := &volume{ID: id, Kind: k}
		p := d.volumeImage(id)
		if k == kindDir {
			p = d.volumeDir(id)
		}
		if exists(p) {
			if err := d.removeData(ctx, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// detachIfAttached detaches a loop device still attached to the volume's
// backing file (a volume deleted while staged after a node crash).
func (d *Driver) detachIfAttached(ctx context.Context, v *volume) error {
	if v.Kind == kindDir {
		return nil
	}
	dev, ok, err := block.FindLoop(ctx, d.volumeImage(v.ID))
	if err != nil || !ok {
		return nil
	}
	if err := block.DetachLoop(ctx, dev); err != nil {
		return status.Errorf(codes.FailedPrecondition, "volume %s is still in use on this node (%s): %v", v.ID, dev, err)
	}
	return nil
}

// reattach runs at start: block and filesystem volumes that were staged
// before a restart get their loop devices back (reusing any still
// attached), so they keep working.
func (d *Driver) reattach(ctx context.Context, ids []string) {
	for _, id := range ids {
		if _, err := os.Stat(d.stagedMarker(id)); err != nil {
			continue
		}
		if _, err := block.AttachLoop(ctx, d.volumeImage(id), block.LoopOptions{}); err != nil {
			d.log.Warn("could not re-attach loop device", "volume", id, "error", err)
		}
	}
}

// stagedMarker records that a volume is staged on this node, so a restart
// knows which loop devices to bring back.
func (d *Driver) stagedMarker(id string) string {
	return filepath.Join(d.opts.StateDir, "images", id+".staged")
}

func createSparse(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		if os.IsExist(err) {
			return nil
		}
		return status.Errorf(codes.Internal, "create backing file: %v", err)
	}
	return f.Close()
}

// copyFile copies src to dst, keeping holes: only the data extents
// (SEEK_DATA/SEEK_HOLE) are copied, in the kernel (copy_file_range), so a
// mostly empty 10 GiB image copies in milliseconds.
func copyFile(ctx context.Context, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return status.Errorf(codes.Internal, "open source: %v", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return status.Errorf(codes.Internal, "create copy: %v", err)
	}
	err = copySparse(ctx, in, out)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return status.Errorf(codes.Internal, "copy data: %v", err)
	}
	return nil
}

func copySparse(ctx context.Context, in, out *os.File) error {
	st, err := in.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if err := out.Truncate(size); err != nil {
		return err
	}
	infd, outfd := int(in.Fd()), int(out.Fd())
	for off := int64(0); off < size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := unix.Seek(infd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			return nil // only a hole is left
		}
		if err != nil {
			return err
		}
		hole, err := unix.Seek(infd, data, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		for data < hole {
			roff, woff := data, data
			n, err := unix.CopyFileRange(infd, &roff, outfd, &woff, int(min(hole-data, 1<<30)), 0)
			if err != nil {
				return err
			}
			if n == 0 {
				return io.ErrUnexpectedEOF
			}
			data += int64(n)
		}
		off = hole
	}
	return nil
}

// copyDir copies the directory tree at src into dst (absent, or an empty
// directory) with fstree.Copy: symlinks are copied as symlinks and never
// followed, even when the tenant swaps a file for one mid-copy; holes stay
// holes; mounts below src are refused; and at most maxBytes of data are
// written (OutOfRange beyond: the source holds more than the new
// capacity). live says src is a volume that may be in use, whose entries
// may vanish mid-copy (skipped); any other source losing an entry fails
// the copy with Aborted. On failure nothing Copy made is left.
func copyDir(ctx context.Context, src, dst string, maxBytes int64, live bool) error {
	if _, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{MaxBytes: maxBytes, SkipVanished: live}); err != nil {
		return status.Errorf(status.Code(err), "copy volume data: %v", err)
	}
	return nil
}

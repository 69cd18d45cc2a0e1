package driver

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/ceph/go-ceph/rados"
)

// sizesObject is the object, in each pool's journal namespace, that
// records the size the driver provisioned for each of its volumes: omap
// key the image name, value the size in bytes (decimal). CreateVolume
// writes it once the image is made (blank, clone or restore) and before
// the create is committed, ControllerExpandVolume once the resize
// succeeded, and DeleteVolume removes it before the image. ListVolumes
// reads it with one omap read per page, in the order of rbd_directory's
// keys, instead of each image's header; a volume without a key (made by
// a version that kept no sizes) falls back to its header. An out-of-band
// `rbd resize` is not seen until the next expand.
const sizesObject = "sizes.volume"

// recordSize records size as the provisioned size of image in pool.
func (d *Driver) recordSize(ctx context.Context, creds Credentials, pool, image string, size int64) error {
	io, done, err := d.conns.IOContext(ctx, creds, pool, JournalNamespace)
	if err != nil {
		return err
	}
	defer done()
	if err := io.SetOmap(sizesObject, map[string][]byte{image: []byte(itoa(size))}); err != nil {
		return backendError(err, "journal: record the size of "+image)
	}
	return nil
}

// forgetSize removes the recorded size of image in pool.
func (d *Driver) forgetSize(ctx context.Context, creds Credentials, pool, image string) error {
	io, done, err := d.conns.IOContext(ctx, creds, pool, JournalNamespace)
	if err != nil {
		return err
	}
	defer done()
	if err := io.RmOmapKeys(sizesObject, []string{image}); err != nil && !errors.Is(err, rados.ErrNotFound) {
		return backendError(err, "journal: forget the size of "+image)
	}
	return nil
}

// sizesChunk adds to out up to chunk recorded sizes, of the images whose
// names sort after startAfter, with one read; it returns the last key
// read and how many keys it read.
func sizesChunk(io *rados.IOContext, startAfter string, chunk int64, out map[string]int64) (string, int, error) {
	n, after := 0, startAfter
	err := io.ListOmapValues(sizesObject, startAfter, imagePrefix, max(1, min(chunk, 1000)), func(k string, v []byte) {
		n++
		after = k
		if s, err := strconv.ParseInt(string(v), 10, 64); err == nil && s >= 0 {
			out[k] = s
		}
	})
	if errors.Is(err, rados.ErrNotFound) {
		return after, 0, nil // no size recorded in the pool yet
	}
	return after, n, err
}

// moreSizes adds to out the recorded sizes of the images whose names sort
// after startAfter, up to last, in reads of at most chunk keys.
func moreSizes(io *rados.IOContext, startAfter, last string, chunk int64, out map[string]int64) error {
	for after := startAfter; after < last; {
		var n int
		var err error
		if after, n, err = sizesChunk(io, after, chunk, out); err != nil || n == 0 {
			return err
		}
	}
	return nil
}

// imageFromDirKey is the image name of an rbd_directory key (or of a
// start_after made by dirKeyFrom).
func imageFromDirKey(k string) string { return strings.TrimPrefix(k, "name_") }

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

// recordedSizes returns the recorded sizes of the images whose names sort
// after startAfter, up to and including last, in
// several reads of at most chunk keys.
func recordedSizes(io *rados.IOContext, startAfter, last string, chunk int64) (map[string]int64, error) {
	out := map[string]int64{}
	chunk = max(1, min(chunk, 1000))
	for after := startAfter; ; {
		n, past := 0, false
		err := io.ListOmapValues(sizesObject, after, imagePrefix, chunk, func(k string, v []byte) {
			n++
			after = k
			if k > last {
				past = true
				return
			}
			if s, err := strconv.ParseInt(string(v), 10, 64); err == nil && s >= 0 {
				out[k] = s
			}
		})
		if errors.Is(err, rados.ErrNotFound) {
			return out, nil // no size recorded in the pool yet
		}
		if err != nil {
			return nil, err
		}
		if n == 0 || past {
			return out, nil
		}
	}
}

// imageFromDirKey is the image name of an rbd_directory key (or of a
// start_after made by dirKeyFrom).
func imageFromDirKey(k string) string { return strings.TrimPrefix(k, "name_") }

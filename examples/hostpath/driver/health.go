//go:build linux

package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/health"
)

// Health reasons the driver reports for its backend, besides the path
// conditions of health.Path.
const (
	// ReasonDataMissing (DATA_LOSS): the volume's directory or backing
	// file is gone.
	ReasonDataMissing = "DataMissing"
	// ReasonDataUnreadable (INACCESSIBLE): the volume's data cannot be
	// read (an I/O error, a dead mount over it, the wrong file type).
	ReasonDataUnreadable = "DataUnreadable"
	// ReasonImageTruncated (DATA_LOSS): the backing file is shorter than
	// the volume's capacity; what lay beyond its end is lost.
	ReasonImageTruncated = "ImageTruncated"
	// ReasonLoopDeviceGone (INACCESSIBLE): the volume is staged on this
	// node but no loop device serves its backing file any more.
	ReasonLoopDeviceGone = "LoopDeviceGone"
	// ReasonMappingGone (INACCESSIBLE): an encrypted volume is staged on
	// this node but its dm-crypt mapping is closed or maps another device.
	ReasonMappingGone = "EncryptionMappingGone"
)

type healthEntry = csi.VolumeHealth_VolumeHealthEntry

// backendHealth examines the volume's own storage: its data is there and
// readable, a backing file has its full size, a staged volume still has
// its loop device. It answers NotFound for an unknown volume.
func (d *Driver) backendHealth(ctx context.Context, id string) ([]*healthEntry, error) {
	v, err := d.lookup(id)
	if err != nil {
		return nil, err
	}
	if v.Kind == kindDir {
		if dir := d.dirData(&v); dir != "" {
			return dirDataHealth(dir), nil
		}
		return nil, nil // Lazy: no directory yet, and nothing to lose
	}
	img := d.volumeImage(v.ID)
	out := imageHealth(img, v.Capacity)
	if _, err := os.Stat(d.stagedMarker(v.ID)); err == nil {
		dev, ok, err := block.FindLoop(ctx, img)
		if err == nil && !ok {
			out = append(out, health.Inaccessible(ReasonLoopDeviceGone,
				fmt.Sprintf("volume %s is staged on this node but no loop device serves its backing file", v.ID)))
		}
		if err == nil && ok && v.encrypted() {
			if err := d.mounter.CheckEncrypted(ctx, v.ID, dev); err != nil {
				out = append(out, health.Inaccessible(ReasonMappingGone,
					fmt.Sprintf("volume %s is staged on this node: %v", v.ID, status.Convert(err).Message())))
			}
		}
	}
	return out, nil
}

// dirDataHealth checks a directory volume: present, a directory, listable.
func dirDataHealth(dir string) []*healthEntry {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return []*healthEntry{health.DataLoss(ReasonDataMissing, fmt.Sprintf("the volume's directory %s is gone", dir))}
	}
	if err == nil {
		f := os.NewFile(uintptr(fd), dir)
		_, err = f.ReadDir(1)
		f.Close()
		if err == io.EOF {
			err = nil
		}
	}
	if err != nil {
		return []*healthEntry{health.Inaccessible(ReasonDataUnreadable, fmt.Sprintf("the volume's directory %s cannot be read: %v", dir, err))}
	}
	return nil
}

// imageHealth checks a backing file: present, a regular file of the
// volume's capacity, its first block readable.
func imageHealth(img string, capacity int64) []*healthEntry {
	f, err := os.OpenFile(img, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return []*healthEntry{health.DataLoss(ReasonDataMissing, fmt.Sprintf("the volume's backing file %s is gone", img))}
	}
	if err != nil {
		return []*healthEntry{health.Inaccessible(ReasonDataUnreadable, fmt.Sprintf("the volume's backing file %s cannot be opened: %v", img, err))}
	}
	defer f.Close()
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file (%v)", st.Mode().Type())
	}
	if err == nil && st.Size() > 0 {
		_, err = f.ReadAt(make([]byte, 512), 0)
		if err == io.EOF {
			err = nil
		}
	}
	if err != nil {
		return []*healthEntry{health.Inaccessible(ReasonDataUnreadable, fmt.Sprintf("the volume's backing file %s cannot be read: %v", img, err))}
	}
	if st.Size() < capacity {
		return []*healthEntry{health.DataLoss(ReasonImageTruncated, fmt.Sprintf("the volume's backing file %s has %d bytes, less than its capacity of %d", img, st.Size(), capacity))}
	}
	return nil
}

// ControllerGetVolumeHealth reports the volume's backend conditions (the
// controller and node of this driver share one state directory).
func (d *Driver) ControllerGetVolumeHealth(ctx context.Context, r *csi.ControllerGetVolumeHealthRequest) (*csi.ControllerGetVolumeHealthResponse, error) {
	return health.ControllerVolume(ctx, r, d.backendHealth)
}

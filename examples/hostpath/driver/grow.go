//go:build linux

package driver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/mount"
)

// growExt4Offline grows the ext4 filesystem in a backing file that no
// loop device or mount uses (a restored or cloned volume, an expansion
// while unstaged, a stage after an expansion made while staged) to the
// file's size, with mount.Mounter.GrowOffline. Kubelet asks for no
// NodeExpandVolume on a new volume, so a copy made larger than its source
// would otherwise keep the source's filesystem size; and growing offline
// needs no CAP_SYS_RESOURCE, which growing a mounted ext4 does (the
// NodeExpandVolume after the next stage then has nothing to do). A file
// holding anything but ext4 (blank: formatted at its full size on the
// first stage; xfs, which grows only mounted; LUKS) is left alone.
//
// resize2fs writes the new groups' metadata into the file's holes, so a
// full state filesystem fails it part way: GrowOffline repairs the
// filesystem and answers RESOURCE_EXHAUSTED; the result's After is then
// the repaired filesystem's size.
func (d *Driver) growExt4Offline(ctx context.Context, img string) (mount.GrowOfflineResult, error) {
	res, err := d.mounter.GrowOffline(ctx, mount.GrowOfflineOptions{Path: img})
	if err != nil {
		return res, status.Errorf(status.Code(err), "grow the filesystem to the volume's size: %v", err)
	}
	return res, nil
}

// xfsBytes reads the size of the xfs data section in path from its
// superblock: ok is false when path holds no xfs filesystem.
func xfsBytes(path string) (size int64, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	var sb [16]byte
	if _, err := f.ReadAt(sb[:], 0); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, false, nil
		}
		return 0, false, err
	}
	if string(sb[:4]) != "XFSB" { // sb_magicnum
		return 0, false, nil
	}
	be := binary.BigEndian
	bs, blocks := be.Uint32(sb[4:]), be.Uint64(sb[8:]) // sb_blocksize, sb_dblocks
	if bs < 512 || bs > 65536 || blocks > 1<<50 {
		return 0, false, fmt.Errorf("%s: xfs superblock with %d blocks of %d bytes", path, blocks, bs)
	}
	return int64(blocks) * int64(bs), true, nil
}

// growBeforeStage grows a filesystem volume's filesystem to its backing
// file when the file is larger — a copy restored or cloned into a larger
// volume, or an expansion made while the volume was staged, whose node
// step (NodeExpandVolume, growing the mounted filesystem) did not run or
// could not (CAP_SYS_RESOURCE for ext4). Kubelet sends no
// NodeExpandVolume for a new claim, and after a re-stage the one it sends
// then finds nothing to do. ext4 grows here, offline, before the loop
// device is attached; xfs grows only mounted, so growMounted asks the
// stage to grow it right after the mount (xfs_growfs: CAP_SYS_ADMIN only).
// A volume whose loop device is attached already (a stage elsewhere, or
// one left by a crash) is left to NodeExpandVolume: writing the file under
// an attached loop device could leave the device's cache stale. An
// encrypted volume's file holds LUKS: its ext4 grows in the stage, on the
// mapping (StageOptions.Grow), and its xfs after the mount, where a
// filesystem at full size already costs one xfs_growfs that does nothing.
func (d *Driver) growBeforeStage(ctx context.Context, v *volume) (growMounted bool, err error) {
	if v.Kind != kindFS {
		return false, nil
	}
	if v.encrypted() {
		return v.FSType == "xfs", nil
	}
	img := d.volumeImage(v.ID)
	if _, attached, err := block.FindLoop(ctx, img); err != nil || attached {
		return false, err
	}
	if v.FSType != "xfs" {
		_, err := d.growExt4Offline(ctx, img)
		return false, err
	}
	fs, ok, err := xfsBytes(img)
	if err != nil {
		return false, status.Errorf(codes.Internal, "read the filesystem size of volume %s: %v", v.ID, err)
	}
	if !ok {
		return false, nil // blank: formatted at its full size by the stage
	}
	fi, err := os.Stat(img)
	if err != nil {
		return false, status.Errorf(codes.Internal, "volume %s: %v", v.ID, err)
	}
	return fi.Size() >= fs+4096, nil
}

// shrinkBackAfterFailedGrow gives the backing file of v back its recorded
// size after ControllerExpandVolume grew it and growing the filesystem
// failed (res: what GrowOffline left), so the file and the record agree
// and the next stage does not grow the filesystem past the capacity the CO
// knows. It does so only when the filesystem (repaired by GrowOffline)
// still fits that size; one that grew anyway keeps the larger file, and
// the CO's retry of the expansion records it.
func (d *Driver) shrinkBackAfterFailedGrow(v *volume, res mount.GrowOfflineResult) {
	img, size := d.volumeImage(v.ID), v.imageSize(v.Capacity)
	if res.After == 0 || res.After > size {
		d.log.Warn("growing the filesystem failed; its backing file keeps the new size", "volume", v.ID, "filesystem", res.After)
		return
	}
	if err := os.Truncate(img, size); err != nil {
		d.log.Warn("growing the filesystem failed; could not give its backing file back its size", "volume", v.ID, "error", err)
	}
}

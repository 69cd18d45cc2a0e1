//go:build linux

package driver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/command"
)

// growExt4Offline grows the ext4 filesystem in a backing file that no
// loop device or mount uses (a restored or cloned volume, an expansion
// while unstaged, a stage after an expansion made while staged) to the
// file's size. Kubelet asks for no NodeExpandVolume on a new volume, so a
// copy made larger than its source would otherwise keep the source's
// filesystem size; and growing offline needs no CAP_SYS_RESOURCE, which
// growing a mounted ext4 does (the NodeExpandVolume after the next stage
// then has nothing to do). A full check comes first (e2fsck -f -p; exit
// status 1 means it fixed something, which a snapshot of a mounted
// filesystem may need). A file holding anything but ext4 (blank: formatted
// at its full size on the first stage; xfs, which grows only mounted;
// LUKS) is left alone.
//
// resize2fs writes the new groups' metadata into the file's holes, so a
// full state filesystem fails it part way (ENOSPC): see repairFailedGrow.
func (d *Driver) growExt4Offline(ctx context.Context, img string) error {
	if format, err := d.mounter.DiskFormat(ctx, img); err != nil || format != "ext4" {
		return err
	}
	if _, err := command.Run(ctx, "e2fsck", []string{"-f", "-p", img}, command.Options{}); err != nil {
		var ce *command.Error
		if !errors.As(err, &ce) || ce.ExitCode != 1 {
			return status.Errorf(status.Code(err), "check the filesystem before growing it: %v", err)
		}
	}
	if _, err := command.Run(ctx, "resize2fs", []string{img}, command.Options{}); err != nil {
		return d.repairFailedGrow(ctx, img, err)
	}
	return nil
}

// repairFailedGrow answers a resize2fs that failed on img, after putting
// the filesystem right. resize2fs writes the primary superblock last, so a
// run stopped part way (ENOSPC writing a hole, a cancelled call) leaves
// the old size with allocation maps that already claim blocks for the new
// groups' metadata — a filesystem e2fsck -p refuses to mount ("UNEXPECTED
// INCONSISTENCY"). The repair is the one resize2fs asks for, e2fsck -f -y,
// on a context of its own (the call's may be what stopped resize2fs); it
// only writes blocks resize2fs wrote already, so it works on the full disk.
// A full disk answers RESOURCE_EXHAUSTED, the rest keeps resize2fs's code.
func (d *Driver) repairFailedGrow(ctx context.Context, img string, cause error) error {
	code, what := status.Code(cause), cause.Error()
	var ce *command.Error
	if errors.As(cause, &ce) && bytes.Contains(append(ce.Stdout, ce.Stderr...), []byte("No space left on device")) {
		code, what = codes.ResourceExhausted, "the filesystem of the state directory is full (resize2fs: No space left on device); free space on it and retry"
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	if _, err := command.Run(rctx, "e2fsck", []string{"-f", "-y", img}, command.Options{}); err != nil {
		if !errors.As(err, &ce) || ce.ExitCode != 1 {
			return status.Errorf(codes.Internal, "grow the filesystem to the volume's size: %s; then the check resize2fs asks for failed too: %v: repair it by hand (e2fsck -f -y %s)", what, err, img)
		}
	}
	d.log.Warn("growing a filesystem failed; checked and repaired it", "image", img, "error", cause)
	return status.Errorf(code, "grow the filesystem to the volume's size: %s", what)
}

// ext4Bytes reads the size of the ext4 filesystem in path from its
// superblock: ok is false when path holds no ext4 (or ext2/3)
// filesystem.
func ext4Bytes(path string) (size int64, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	var sb [1024]byte
	if _, err := f.ReadAt(sb[:], 1024); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, false, nil
		}
		return 0, false, err
	}
	le := binary.LittleEndian
	if le.Uint16(sb[0x38:]) != 0xef53 { // s_magic
		return 0, false, nil
	}
	logBlock := le.Uint32(sb[0x18:]) // s_log_block_size
	if logBlock > 6 {
		return 0, false, fmt.Errorf("%s: ext4 superblock with block size 1024<<%d", path, logBlock)
	}
	blocks := uint64(le.Uint32(sb[0x4:])) // s_blocks_count_lo
	if le.Uint32(sb[0x60:])&0x80 != 0 {   // INCOMPAT_64BIT: s_blocks_count_hi
		blocks |= uint64(le.Uint32(sb[0x150:])) << 32
	}
	return int64(blocks) << (10 + logBlock), true, nil
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
// an attached loop device could leave the device's cache stale. Encrypted
// volumes are too: their file holds LUKS.
func (d *Driver) growBeforeStage(ctx context.Context, v *volume) (growMounted bool, err error) {
	if v.Kind != kindFS || v.encrypted() {
		return false, nil
	}
	img := d.volumeImage(v.ID)
	read := ext4Bytes
	if v.FSType == "xfs" {
		read = xfsBytes
	}
	fs, ok, err := read(img)
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
	if fi.Size() < fs+4096 {
		return false, nil
	}
	if _, attached, err := block.FindLoop(ctx, img); err != nil || attached {
		return false, err
	}
	if v.FSType == "xfs" {
		return true, nil
	}
	return false, d.growExt4Offline(ctx, img)
}

// shrinkBackAfterFailedGrow gives the backing file of v back its recorded
// size after ControllerExpandVolume grew it and growing the filesystem
// failed, so the file and the record agree and the next stage does not
// grow the filesystem past the capacity the CO knows. It does so only when
// the filesystem (checked by repairFailedGrow) still fits that size; one
// that grew anyway keeps the larger file, and the CO's retry of the
// expansion records it.
func (d *Driver) shrinkBackAfterFailedGrow(v *volume) {
	img, size := d.volumeImage(v.ID), v.imageSize(v.Capacity)
	if fs, ok, err := ext4Bytes(img); err != nil || !ok || fs > size {
		d.log.Warn("growing the filesystem failed; its backing file keeps the new size", "volume", v.ID, "filesystem", fs, "error", err)
		return
	}
	if err := os.Truncate(img, size); err != nil {
		d.log.Warn("growing the filesystem failed; could not give its backing file back its size", "volume", v.ID, "error", err)
	}
}

//go:build linux

package mount

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/block"
)

// growToolTimeout bounds resize2fs, and the e2fsck that repairs a
// resize2fs stopped part way, which run on a context of their own (see
// GrowOffline).
const growToolTimeout = 10 * time.Minute

// fullBelow is the free space under which the storage behind a failed
// write is taken to be full.
const fullBelow = 1 << 20

// GrowOffline grows the ext2/3/4 file system in o.Path — an image file,
// or a block device — that no mount or loop device uses to the size of
// the file or device, offline: e2fsck -f -p (resize2fs refuses a file
// system not checked since its last mount), then resize2fs. Growing
// offline needs no CAP_SYS_RESOURCE, which growing a mounted ext4 does
// (see CanResizeOnline). Use it on a volume's backing file before
// attaching it (a copy restored or cloned into a larger volume, an
// expansion while unstaged); StageOptions.Grow does the same on the
// device Stage mounts.
//
// A path holding no ext2/3/4 file system (blank, xfs, which grows only
// mounted, LUKS) or one already at full size is left alone: the result
// then has Before == After (0 for no ext file system).
//
// o.Path must be absolute and clean and is opened without following a
// symlink anywhere in it (codes.FailedPrecondition naming it; resolve a
// /dev/disk/by-* name with filepath.EvalSymlinks first); the tools then
// work on the file opened, through /proc/<pid>/fd, so a path swapped for
// a symlink meanwhile cannot redirect them. A missing path is
// codes.NotFound; a file attached to a loop device, or a block device
// mounted or held (O_EXCL), codes.FailedPrecondition; anything else than
// a regular file or block device codes.InvalidArgument. A file system
// e2fsck -p cannot correct is codes.FailedPrecondition.
//
// Once started, resize2fs is not stopped when ctx ends: killed part way,
// it can leave a file system that e2fsck repairs only by dropping its
// journal or relocating inode tables. It runs to the end (at most ten
// minutes) and GrowOffline then returns ctx's error (codes.Canceled or
// codes.DeadlineExceeded) with the file system grown. A resize2fs that
// fails leaves the old size with allocation maps that already claim the
// new groups' metadata, a file system e2fsck -p refuses; GrowOffline
// repairs it with the check resize2fs asks for (e2fsck -f -y) and
// returns codes.ResourceExhausted when the storage behind the path is
// full (resize2fs writes into a sparse file's holes), else
// codes.Internal; the result's After is then the repaired size. A
// repair that fails too is codes.Internal naming the command to run by
// hand.
func (m *Mounter) GrowOffline(ctx context.Context, o GrowOfflineOptions) (GrowOfflineResult, error) {
	if err := checkPath("image", o.Path); err != nil {
		return GrowOfflineResult{}, err
	}
	pfd, err := openPath("image", o.Path, false)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return GrowOfflineResult{}, errorf(codes.NotFound, err, "image %s", o.Path)
		}
		return GrowOfflineResult{}, err
	}
	f, err := os.OpenFile(fdPath(pfd), os.O_RDONLY|unix.O_CLOEXEC, 0)
	unix.Close(pfd)
	if err != nil {
		return GrowOfflineResult{}, errorf(codes.Internal, err, "open image %s", o.Path)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return GrowOfflineResult{}, errorf(codes.Internal, err, "stat image %s", o.Path)
	}
	// The tools open the file this process opened, whatever o.Path names
	// by then.
	tool := "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(f.Fd()))
	var busy func() error
	switch fi.Mode().Type() {
	case 0:
		busy = func() error {
			if dev, ok, err := block.FindLoop(ctx, fdPath(int(f.Fd()))); err != nil || ok {
				if err != nil {
					return err
				}
				return errorf(codes.FailedPrecondition, nil,
					"image %s is attached to loop device %s: grow it offline only when detached, or online (Resize) once mounted", o.Path, dev)
			}
			return nil
		}
	case os.ModeDevice:
		busy = func() error {
			fd, err := unix.Open(fdPath(int(f.Fd())), unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
			if err != nil {
				return errorf(codes.FailedPrecondition, err,
					"device %s is in use (mounted, or held by a mapping): grow it offline only when unused, or online (Resize) once mounted", o.Path)
			}
			unix.Close(fd)
			return nil
		}
	default:
		return GrowOfflineResult{}, errorf(codes.InvalidArgument, nil,
			"image %s is a %s, want a regular file or a block device", o.Path, fi.Mode().Type())
	}
	return m.growExt(ctx, o.Path, tool, f, busy)
}

// growOffline grows the existing, unmounted ext2/3/4 file system on
// o.Device to the device's size when o.Grow asks for it
// (StageOptions.Grow), with GrowOffline's steps. Stage holds the device
// already: no busy check beyond e2fsck's.
func (m *Mounter) growOffline(ctx context.Context, o StageOptions) error {
	if !o.Grow || o.ReadOnly || !strings.HasPrefix(o.FSType, "ext") {
		return nil
	}
	f, err := os.OpenFile(o.Device, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return errorf(codes.Internal, err, "open %s to grow its file system", o.Device)
	}
	defer f.Close()
	_, err = m.growExt(ctx, o.Device, o.Device, f, func() error { return nil })
	return err
}

// growExt is GrowOffline's work on f, opened from name; the tools are
// given tool. busy refuses a file in use; it runs only when there is
// something to grow.
func (m *Mounter) growExt(ctx context.Context, name, tool string, f *os.File, busy func() error) (GrowOfflineResult, error) {
	fsBytes, blockSize, devBytes, ok, err := extSizes(f)
	if err != nil {
		return GrowOfflineResult{}, errorf(codes.Internal, err, "read the sizes of the file system in %s", name)
	}
	res := GrowOfflineResult{Before: fsBytes, After: fsBytes}
	if !ok || devBytes-fsBytes < blockSize {
		return res, nil // no ext file system, or no whole block to grow into
	}
	if err := busy(); err != nil {
		return res, err
	}
	out, err := m.run.Run(ctx, "e2fsck", "-f", "-p", tool)
	var ee *ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return res, ctxError(ctx.Err(), "e2fsck %s", name)
	case errors.As(err, &ee) && (ee.Code == 1 || ee.Code == 2):
		m.log.WarnContext(ctx, "e2fsck corrected errors", "device", name, "output", summary(out, err))
	default:
		return res, errorf(codes.FailedPrecondition, err, "check the file system in %s before growing it%s", name, outputSuffix(out, err))
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), growToolTimeout)
	out, err = m.run.Run(rctx, "resize2fs", tool)
	timedOut := rctx.Err() != nil
	cancel()
	if err != nil {
		return m.repairGrow(ctx, name, tool, f, res, out, err, timedOut)
	}
	if res.After, _, _, _, err = extSizes(f); err != nil {
		return res, errorf(codes.Internal, err, "read the size of the file system grown in %s", name)
	}
	m.log.InfoContext(ctx, "grown offline", "device", name, "from", res.Before, "to", res.After)
	if err := ctx.Err(); err != nil {
		return res, ctxError(err, "grow the file system in %s (resize2fs was let finish: it grew from %d to %d bytes)", name, res.Before, res.After)
	}
	return res, nil
}

// repairGrow answers a resize2fs that failed on f (output out, error
// cause), after putting the file system right: resize2fs writes the
// primary superblock last, so one stopped part way leaves the old size
// with allocation maps that already claim blocks for the new groups'
// metadata, which e2fsck -p refuses ("UNEXPECTED INCONSISTENCY"). The
// repair is the one resize2fs asks for, e2fsck -f -y, on a context of its
// own; it writes only blocks resize2fs wrote already, so it works on a
// full disk. timedOut says resize2fs ran out of growToolTimeout.
func (m *Mounter) repairGrow(ctx context.Context, name, tool string, f *os.File, res GrowOfflineResult, out []byte, cause error, timedOut bool) (GrowOfflineResult, error) {
	code, why := codes.Internal, "resize2fs failed"+outputSuffix(out, cause)
	if timedOut {
		code, why = codes.DeadlineExceeded, fmt.Sprintf("resize2fs did not finish within %v and was stopped", growToolTimeout)
	} else if msg, full := storageFull(fdPath(int(f.Fd())), name, out, cause); full {
		code, why = codes.ResourceExhausted, msg+": free space there and retry"
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), growToolTimeout)
	defer cancel()
	rout, err := m.run.Run(rctx, "e2fsck", "-f", "-y", tool)
	var ee *ExitError
	if err != nil && !(errors.As(err, &ee) && (ee.Code == 1 || ee.Code == 2)) {
		return res, errorf(codes.Internal, cause,
			"grow the file system in %s: %s; then the check resize2fs asks for failed too%s: repair it by hand (e2fsck -f -y %s)",
			name, why, outputSuffix(rout, err), name)
	}
	if after, _, _, _, err := extSizes(f); err == nil {
		res.After = after
	}
	m.log.WarnContext(ctx, "growing a file system failed; checked and repaired it", "device", name, "error", cause)
	return res, errorf(code, cause, "grow the file system in %s: %s (the file system was checked and repaired, and keeps %d bytes)", name, why, res.After)
}

// storageFull tells whether a tool's write to path (an image file, a
// loop device or a mapping over one) failed because the storage behind
// it is full: the tool says ENOSPC, or — a loop device turns its backing
// file's ENOSPC into EIO — the file system holding the file has less
// than fullBelow bytes free. msg says so, naming the file (name when
// it is path itself).
func storageFull(path, name string, out []byte, err error) (msg string, full bool) {
	var ee *ExitError
	said := bytes.Contains(out, []byte("No space left on device")) ||
		errors.As(err, &ee) && bytes.Contains(append(append([]byte{}, ee.Stdout...), ee.Stderr...), []byte("No space left on device"))
	file := backingFile(path)
	var sfs unix.Statfs_t
	if file == "" || unix.Statfs(file, &sfs) != nil {
		if said {
			return "the storage behind it is full (No space left on device)", true
		}
		return "", false
	}
	free := int64(sfs.Bavail) * sfs.Bsize
	if !said && free >= fullBelow {
		return "", false
	}
	if file == path {
		file = name
	}
	return fmt.Sprintf("the file system holding %s is full (%d bytes free)", file, free), true
}

// backingFile returns the file behind path: path itself when it is a
// regular file, the backing file of a loop device, or of the loop device
// under a device-mapper device (dm-crypt); "" when there is none.
func backingFile(path string) string {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return ""
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return path
	case unix.S_IFBLK:
	default:
		return ""
	}
	sys := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	for range 4 { // a stack of mappings, each over one device
		if b, err := os.ReadFile(sys + "/loop/backing_file"); err == nil {
			return strings.TrimSuffix(string(b), "\n")
		}
		slaves, err := os.ReadDir(sys + "/slaves")
		if err != nil || len(slaves) != 1 {
			return ""
		}
		sys = filepath.Join("/sys/class/block", slaves[0].Name())
	}
	return ""
}

// extSizes returns the size and block size of the ext2/3/4 file system in
// f, from its superblock, and the size of f; ok is false when f holds no
// ext file system.
func extSizes(f *os.File) (fsBytes, blockSize, devBytes int64, ok bool, err error) {
	if devBytes, err = f.Seek(0, io.SeekEnd); err != nil {
		return 0, 0, 0, false, err
	}
	sb := make([]byte, 1024)
	if _, err := f.ReadAt(sb, 1024); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, 0, devBytes, false, nil
		}
		return 0, 0, 0, false, err
	}
	le := binary.LittleEndian
	if le.Uint16(sb[0x38:]) != 0xef53 { // s_magic
		return 0, 0, devBytes, false, nil
	}
	blocks := uint64(le.Uint32(sb[0x4:])) // s_blocks_count_lo
	if le.Uint32(sb[0x60:])&0x80 != 0 {   // INCOMPAT_64BIT: s_blocks_count_hi
		blocks |= uint64(le.Uint32(sb[0x150:])) << 32
	}
	logSize := le.Uint32(sb[0x18:]) // s_log_block_size
	if logSize > 6 {
		return 0, 0, 0, false, fmt.Errorf("ext superblock with block size 2^%d KiB", logSize)
	}
	return int64(blocks << (10 + logSize)), 1 << (10 + logSize), devBytes, true, nil
}

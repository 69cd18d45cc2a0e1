//go:build linux

package block

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	mountutils "k8s.io/mount-utils"

	"github.com/csikit/csikit/internal/mountpoint"
)

// loopSetDirectIO is LOOP_SET_DIRECT_IO, used only on kernels without
// LOOP_CONFIGURE.
const loopSetDirectIO = 0x4C08

// attachTries bounds how often AttachLoop retries when another process takes
// the free device LOOP_CTL_GET_FREE named before it could configure it.
const attachTries = 8

// LoopOptions configures a loop device attached by AttachLoop.
type LoopOptions struct {
	// ReadOnly attaches the device read-only.
	ReadOnly bool
	// DirectIO asks the kernel to bypass the page cache of the backing
	// file, avoiding double caching. The backing file system must support
	// O_DIRECT.
	DirectIO bool
	// AutoClear detaches the device automatically when its last user
	// closes it (after the last unmount). Leave it off for a device that
	// must survive between NodeUnstage and the next NodeStage.
	AutoClear bool
	// Offset is where in the backing file the device starts, in bytes: a
	// multiple of SectorSize, before the file's end. Default 0.
	Offset int64
	// SizeLimit is the device's size in bytes (DeviceSize reports it): a
	// multiple of SectorSize, Offset+SizeLimit within the file. 0 means
	// up to the file's end.
	SizeLimit int64
}

// checkRange validates o's Offset and SizeLimit against a backing file of
// size bytes (size < 0: alignment only).
func (o LoopOptions) checkRange(backingFile string, size int64) error {
	if o.Offset < 0 || o.SizeLimit < 0 || o.Offset%SectorSize != 0 || o.SizeLimit%SectorSize != 0 {
		return errorf(codes.InvalidArgument, nil, "loop device for %s: offset %d and size limit %d must be non-negative multiples of %d",
			backingFile, o.Offset, o.SizeLimit, SectorSize)
	}
	if size >= 0 && (o.Offset >= size || o.SizeLimit > size-o.Offset) {
		return errorf(codes.OutOfRange, nil, "loop device for %s: offset %d and size limit %d do not fit in the file (%d bytes)",
			backingFile, o.Offset, o.SizeLimit, size)
	}
	return nil
}

// AttachLoop attaches backingFile to a free loop device and returns the
// device path (e.g. /dev/loop3). It is idempotent: when a loop device is
// already attached to the same file at the same Offset and SizeLimit (see
// FindLoopAt) that device is returned and the other options are not
// applied again. An Offset or SizeLimit not a multiple of SectorSize gives
// codes.InvalidArgument, a range outside the file codes.OutOfRange. A
// missing backing file gives codes.NotFound; one that is not a regular file
// codes.InvalidArgument. Concurrent calls for one backing file must be
// serialized by the caller (a per-volume lock does it), or both may attach.
func AttachLoop(ctx context.Context, backingFile string, opts LoopOptions) (string, error) {
	if err := checkPath("backing file", backingFile); err != nil {
		return "", err
	}
	if err := opts.checkRange(backingFile, -1); err != nil {
		return "", err
	}
	if dev, ok, err := FindLoopAt(ctx, backingFile, opts.Offset, opts.SizeLimit); err != nil || ok {
		return dev, err
	}
	mode := unix.O_RDWR
	if opts.ReadOnly {
		mode = unix.O_RDONLY
	}
	bfd, err := unix.Open(backingFile, mode|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOENT) {
		return "", errorf(codes.NotFound, err, "loop backing file %s", backingFile)
	}
	if errors.Is(err, unix.EISDIR) {
		return "", errorf(codes.InvalidArgument, err, "loop backing file %s is not a regular file", backingFile)
	}
	if err != nil {
		return "", errorf(codes.Internal, err, "open loop backing file %s", backingFile)
	}
	defer unix.Close(bfd)
	var st unix.Stat_t
	if err := unix.Fstat(bfd, &st); err != nil {
		return "", errorf(codes.Internal, err, "stat loop backing file %s", backingFile)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", errorf(codes.InvalidArgument, nil, "loop backing file %s is not a regular file", backingFile)
	}
	if err := opts.checkRange(backingFile, st.Size); err != nil {
		return "", err
	}
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", errorf(codes.Internal, err, "open /dev/loop-control")
	}
	defer unix.Close(ctl)
	for try := 0; try < attachTries; try++ {
		if err := ctx.Err(); err != nil {
			return "", ctxError(err, "attach loop device for %s", backingFile)
		}
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", errorf(codes.ResourceExhausted, err, "find a free loop device")
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		err = configureLoop(dev, bfd, backingFile, opts)
		if errors.Is(err, unix.EBUSY) {
			continue // another process took it first
		}
		if err != nil {
			return "", errorf(codes.Internal, err, "attach %s to %s", backingFile, dev)
		}
		return dev, nil
	}
	return "", errorf(codes.Aborted, nil, "attach loop device for %s: lost the race for a free device %d times", backingFile, attachTries)
}

func configureLoop(dev string, bfd int, backingFile string, opts LoopOptions) error {
	mode := unix.O_RDWR
	if opts.ReadOnly {
		mode = unix.O_RDONLY
	}
	lfd, err := unix.Open(dev, mode|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(lfd)
	var info unix.LoopInfo64
	if opts.ReadOnly {
		info.Flags |= unix.LO_FLAGS_READ_ONLY
	}
	if opts.AutoClear {
		info.Flags |= unix.LO_FLAGS_AUTOCLEAR
	}
	info.Offset, info.Sizelimit = uint64(opts.Offset), uint64(opts.SizeLimit)
	copy(info.File_name[:len(info.File_name)-1], backingFile)
	cfg := unix.LoopConfig{Fd: uint32(bfd), Info: info}
	if opts.DirectIO {
		cfg.Info.Flags |= unix.LO_FLAGS_DIRECT_IO
	}
	err = unix.IoctlLoopConfigure(lfd, &cfg)
	if !errors.Is(err, unix.ENOTTY) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	// Kernels before 5.8 lack LOOP_CONFIGURE: set the fd, then the status.
	if err := unix.IoctlSetInt(lfd, unix.LOOP_SET_FD, bfd); err != nil {
		return err
	}
	if err := unix.IoctlLoopSetStatus64(lfd, &info); err != nil {
		_ = unix.IoctlSetInt(lfd, unix.LOOP_CLR_FD, 0)
		return err
	}
	if opts.DirectIO {
		if err := unix.IoctlSetInt(lfd, loopSetDirectIO, 1); err != nil {
			_ = unix.IoctlSetInt(lfd, unix.LOOP_CLR_FD, 0)
			return fmt.Errorf("enable direct I/O: %w", err)
		}
	}
	return nil
}

// FindLoop returns the loop device attached to the whole of backingFile
// (offset 0, no size limit): FindLoopAt(ctx, backingFile, 0, 0).
func FindLoop(ctx context.Context, backingFile string) (dev string, ok bool, err error) {
	return FindLoopAt(ctx, backingFile, 0, 0)
}

// FindLoopAt returns the loop device attached to backingFile at offset
// with sizeLimit (0: up to the file's end); ok is false when there is
// none. Two devices on one file at different offsets or limits are
// different devices.
//
// Candidates are picked from sysfs alone — /sys/block/loopN/loop/
// backing_file (the file's current path, followed through renames, never
// truncated), offset and sizelimit — which no backing file system is
// asked about, so a device whose backing file hangs (a FUSE server that
// stopped answering) cannot hang the search. A candidate is then
// confirmed with LOOP_GET_STATUS64 by the file's device and inode number.
// The candidates are the devices whose path is backingFile's (symlinks
// resolved); only when none is found, those whose file has the same base
// name, for a file attached through another path to it (a second bind
// mount, or a driver container before a restart, whose paths sysfs shows
// as they were in its own mount namespace).
func FindLoopAt(ctx context.Context, backingFile string, offset, sizeLimit int64) (dev string, ok bool, err error) {
	if err := checkPath("backing file", backingFile); err != nil {
		return "", false, err
	}
	var st unix.Stat_t
	if err := unix.Stat(backingFile, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", false, errorf(codes.NotFound, err, "loop backing file %s", backingFile)
		}
		return "", false, errorf(codes.Internal, err, "stat loop backing file %s", backingFile)
	}
	resolved, err := filepath.EvalSymlinks(backingFile)
	if err != nil {
		resolved = backingFile
	}
	entries, err := os.ReadDir("/sys/block")
	if err != nil {
		return "", false, errorf(codes.Internal, err, "list block devices")
	}
	var sameName []string
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "loop") {
			continue
		}
		if err := ctx.Err(); err != nil {
			return "", false, ctxError(err, "find loop device for %s", backingFile)
		}
		sys := "/sys/block/" + name + "/loop/"
		b, err := os.ReadFile(sys + "backing_file")
		if err != nil {
			continue // not attached
		}
		path := strings.TrimSuffix(string(b), "\n")
		if path != resolved && filepath.Base(path) != filepath.Base(resolved) {
			continue
		}
		if sysfsInt(sys+"offset") != offset || sysfsInt(sys+"sizelimit") != sizeLimit {
			continue
		}
		if path != resolved {
			sameName = append(sameName, name)
			continue
		}
		if isLoopOf(name, &st, offset, sizeLimit) {
			return "/dev/" + name, true, nil
		}
	}
	for _, name := range sameName {
		if err := ctx.Err(); err != nil {
			return "", false, ctxError(err, "find loop device for %s", backingFile)
		}
		if isLoopOfWithin(name, &st, offset, sizeLimit, sameNameWait) {
			return "/dev/" + name, true, nil
		}
	}
	return "", false, nil
}

// sameNameWait bounds the check of a device whose file has only the same
// base name: LOOP_GET_STATUS64 stats the device's backing file, which may
// be another mapping's on a FUSE server that stopped answering (an RBD
// image mapped by a second node plugin on the host, whose rbd-fuse was
// fenced), and that must not hang the search.
const sameNameWait = 2 * time.Second

// isLoopOfWithin is isLoopOf, taken as false when the kernel does not
// answer within wait (the blocked goroutine ends when the backing file's
// server answers or dies).
func isLoopOfWithin(name string, st *unix.Stat_t, offset, sizeLimit int64, wait time.Duration) bool {
	ch := make(chan bool, 1)
	go func() { ch <- isLoopOf(name, st, offset, sizeLimit) }()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case ok := <-ch:
		return ok
	case <-t.C:
		return false
	}
}

// isLoopOf asks the kernel whether loop device name is attached to the
// file st describes, at offset with sizeLimit.
func isLoopOf(name string, st *unix.Stat_t, offset, sizeLimit int64) bool {
	info, err := loopStatus("/dev/" + name)
	if err != nil {
		return false // detached meanwhile, or no node in /dev
	}
	return info.Inode == st.Ino && decodeDev(info.Device) == [2]uint32{unix.Major(st.Dev), unix.Minor(st.Dev)} &&
		info.Offset == uint64(offset) && info.Sizelimit == uint64(sizeLimit)
}

// sysfsInt reads a number from a sysfs file, -1 when it cannot.
func sysfsInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// loopStatus is LOOP_GET_STATUS64 on dev, which asks the backing file's
// file system for its attributes (and may block on a hung one); tests
// replace it to see which devices FindLoopAt asks.
var loopStatus = func(dev string) (*unix.LoopInfo64, error) {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return unix.IoctlLoopGetStatus64(fd)
}

// decodeDev splits a dev_t in the kernel's "huge" encoding (as
// LOOP_GET_STATUS64 reports it) into major and minor numbers.
func decodeDev(d uint64) [2]uint32 {
	major := uint32((d & 0xfff00) >> 8)
	minor := uint32(d&0xff) | uint32((d>>12)&0xfff00)
	return [2]uint32{major, minor}
}

// DetachLoop detaches the loop device dev (a /dev/loopN path). A device that
// is not attached, or does not exist, is fine.
//
// A device still in use — open elsewhere, or holding a mounted file system —
// is not detached: DetachLoop returns codes.FailedPrecondition naming it and
// leaves it exactly as it was. (The kernel answers LOOP_CLR_FD on such a
// device with success and only marks it to detach on its last close; so
// DetachLoop reads the status back, and when the device is still bound it
// restores the flags it had, autoclear off unless it was on before, so a
// refused detach cannot take effect later behind the caller's back.) When
// nobody else has it open, the device is detached by the time DetachLoop
// returns.
//
// Opens that come and go by themselves — udev's blkid probe after a
// size change, a monitoring agent's scan — are waited out: a device in
// use is retried for up to DetachRetryWindow (or until ctx ends), and only
// then refused, the error naming who holds it where that can be found
// (processes with it open, a mount of it, a device-mapper holder). One
// exception to "exactly as it was": a device whose backing file cannot be
// reached (on a dead FUSE mount, a failed file system) has no status to
// restore, so a refusal leaves it marked to detach on its last close.
func DetachLoop(ctx context.Context, dev string) error {
	if err := checkLoopPath(dev); err != nil {
		return err
	}
	// A device node bound onto a file (a published raw block volume,
	// MountBlock) does not open the device, so the kernel would detach
	// it from under the pod without a word.
	if targets, err := bindTargets(dev); err != nil {
		return errorf(codes.Internal, err, "detach %s: looking for bind mounts of it", dev)
	} else if len(targets) > 0 {
		return errorf(codes.FailedPrecondition, nil,
			"loop device %s is bound onto %s (a published block volume): not detached; unpublish it first",
			dev, strings.Join(targets, ", "))
	}
	deadline := time.Now().Add(DetachRetryWindow)
	delay := 10 * time.Millisecond
	for {
		err := detachLoopOnce(ctx, dev)
		if !errors.Is(err, errLoopInUse) {
			return err
		}
		if time.Now().Add(delay).After(deadline) {
			outcome := ": not detached; unmount it, close it and retry"
			if errors.Is(err, errLoopInUseUnreachable) {
				outcome = " and its backing file cannot be reached: it will detach when its last user closes it"
			}
			return errorf(codes.FailedPrecondition, nil, "loop device %s is in use (%s) after %s of retries%s",
				dev, loopHolders(dev), DetachRetryWindow, outcome)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctxError(ctx.Err(), "detach %s: in use (%s)", dev, loopHolders(dev))
		case <-t.C:
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// DetachRetryWindow is how long DetachLoop retries a device that is in
// use before refusing: long enough for udev's probes after a change
// event (tens of milliseconds), short against a CO's call timeout.
const DetachRetryWindow = 2 * time.Second

// errLoopInUse is detachLoopOnce's refusal: the device is held.
var errLoopInUse = errors.New("loop device in use")

// errLoopInUseUnreachable is errLoopInUse for a device whose backing file
// cannot be reached: its status could not be read, so the autoclear flag
// LOOP_CLR_FD set stays (the device detaches when its last user closes it).
var errLoopInUseUnreachable = fmt.Errorf("%w, backing file unreachable", errLoopInUse)

// detachLoopOnce is one attempt of DetachLoop; a device in use answers
// errLoopInUse and is left as it was.
func detachLoopOnce(ctx context.Context, dev string) error {
	if err := ctx.Err(); err != nil {
		return ctxError(err, "detach %s", dev)
	}
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENXIO) {
		return nil
	}
	if err != nil {
		return errorf(codes.Internal, err, "open %s", dev)
	}
	defer unix.Close(fd) // the last close completes the detach
	before, err := unix.IoctlLoopGetStatus64(fd)
	if errors.Is(err, unix.ENXIO) {
		return nil // not attached
	}
	// The kernel stats the backing file to answer the status: a file on a
	// dead FUSE mount (ENOTCONN, or ECONNABORTED for a call in flight when
	// the daemon died: rbd-fuse killed after a fence) or on a failed or
	// vanished filesystem (EIO, ESTALE) cannot be stat'ed, yet its device
	// can and must still be detached.
	unreachable := errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED) ||
		errors.Is(err, unix.EIO) || errors.Is(err, unix.ESTALE)
	if err != nil && !unreachable {
		return errorf(codes.Internal, err, "read status of %s", dev)
	}
	err = unix.IoctlSetInt(fd, unix.LOOP_CLR_FD, 0)
	if errors.Is(err, unix.ENXIO) {
		return nil
	}
	if errors.Is(err, unix.EBUSY) { // kernels that refuse instead of deferring
		return errLoopInUse
	}
	if err != nil {
		return errorf(codes.Internal, err, "detach %s", dev)
	}
	// Still bound after LOOP_CLR_FD means others hold it open: the kernel
	// only set autoclear. With us as the only opener it is in rundown and
	// answers ENXIO; our close detaches it.
	if _, err := unix.IoctlLoopGetStatus64(fd); errors.Is(err, unix.ENXIO) {
		return nil
	} else if unreachable {
		// Still bound (the kernel answered the status this time, or
		// failed it again), so others hold it: often briefly, e.g. a
		// call that sat on the same dead FUSE mount and has yet to close
		// the device. Its status could not be read to restore, so
		// autoclear stays set: with a dead backing file, detaching when
		// the last user closes it is all that is left to do. DetachLoop
		// retries: once the holder is gone, the device is too.
		return errLoopInUseUnreachable
	} else if err != nil {
		return errorf(codes.Internal, err, "read status of %s after detaching", dev)
	}
	if before.Flags&unix.LO_FLAGS_AUTOCLEAR == 0 {
		if err := unix.IoctlLoopSetStatus64(fd, before); err != nil {
			return errorf(codes.FailedPrecondition, err,
				"loop device %s is in use (%s), and clearing the autoclear flag LOOP_CLR_FD set failed: it will detach when its last user closes it", dev, loopHolders(dev))
		}
	}
	return errLoopInUse
}

// loopHolders says who holds dev, as far as /proc and /sys tell: the
// processes with it open (this one included), the mount points of a file
// system on it, the device-mapper devices built on it. It is for an error
// message; what cannot be read is left out.
func loopHolders(dev string) string {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		return "open or mounted"
	}
	path, err := filepath.EvalSymlinks(dev)
	if err != nil {
		path = dev
	}
	var held []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir("/proc/" + p.Name() + "/fd")
		for _, f := range fds {
			// The link's text, never a stat through it: a descriptor
			// of a file on a hung FUSE mount would block a stat.
			if target, err := os.Readlink("/proc/" + p.Name() + "/fd/" + f.Name()); err == nil && target == path {
				comm, _ := os.ReadFile("/proc/" + p.Name() + "/comm")
				held = append(held, fmt.Sprintf("open by pid %d (%s)", pid, strings.TrimSpace(string(comm))))
				break
			}
		}
	}
	if mounts, err := mountutils.ParseMountInfo("/proc/self/mountinfo"); err == nil {
		for _, m := range mounts {
			if uint32(m.Major) == unix.Major(st.Rdev) && uint32(m.Minor) == unix.Minor(st.Rdev) {
				held = append(held, "mounted at "+m.MountPoint)
			}
		}
	}
	holders, _ := os.ReadDir("/sys/class/block/" + filepath.Base(dev) + "/holders")
	for _, h := range holders {
		held = append(held, "held by "+h.Name())
	}
	if len(held) == 0 {
		return "open or mounted"
	}
	return strings.Join(held, ", ")
}

// RefreshLoopSize makes the loop device dev pick up the current size of its
// backing file (LOOP_SET_CAPACITY), after the file was grown for a volume
// expansion. DeviceSize reports the new size afterwards.
func RefreshLoopSize(ctx context.Context, dev string) error {
	if err := checkLoopPath(dev); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return ctxError(err, "refresh size of %s", dev)
	}
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return errorf(codes.NotFound, err, "loop device %s", dev)
	}
	if err != nil {
		return errorf(codes.Internal, err, "open %s", dev)
	}
	defer unix.Close(fd)
	if err := unix.IoctlSetInt(fd, unix.LOOP_SET_CAPACITY, 0); err != nil {
		if errors.Is(err, unix.ENXIO) {
			return errorf(codes.FailedPrecondition, err, "loop device %s is not attached", dev)
		}
		return errorf(codes.Internal, err, "refresh size of %s", dev)
	}
	return nil
}

func checkLoopPath(dev string) error {
	if err := checkPath("loop device", dev); err != nil {
		return err
	}
	n, found := strings.CutPrefix(dev, "/dev/loop")
	if _, err := strconv.ParseUint(n, 10, 31); !found || err != nil {
		return errorf(codes.InvalidArgument, nil, "%q is not a loop device path, want /dev/loopN", dev)
	}
	return nil
}

// bindTargets returns where the device node dev is bind-mounted as a
// file. Only mounts of a single file (Root other than "/") of a devtmpfs
// or tmpfs (where device nodes live: /dev on a host or in a container)
// are stat'ed, so a hung network or FUSE mount is never touched.
func bindTargets(dev string) ([]string, error) {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return nil, nil
	}
	entries, err := mountpoint.List()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.Root == "/" || (e.FSType != "devtmpfs" && e.FSType != "tmpfs") {
			continue
		}
		var t unix.Stat_t
		if unix.Stat(e.Point, &t) == nil && t.Mode&unix.S_IFMT == unix.S_IFBLK && t.Rdev == st.Rdev {
			out = append(out, e.Point)
		}
	}
	return out, nil
}

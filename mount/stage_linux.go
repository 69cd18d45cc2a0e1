//go:build linux

package mount

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	mountutils "k8s.io/mount-utils"
)

// fsTypePattern is what a file system type may look like: it becomes part of
// a program name (mkfs.<type>), so no slashes.
var fsTypePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]*$`)

// helperFSTypes need a mount.<type> helper program even when none is found
// on this node's PATH; mount(8) then reports the missing helper.
var helperFSTypes = map[string]bool{
	"nfs": true, "nfs4": true, "cifs": true, "smb3": true, "ceph": true, "glusterfs": true, "fuse": true,
}

// Stage mounts the file system on opts.Device at opts.Target, formatting a
// blank device first. It never formats a device that carries any file
// system or partition table: if that is not opts.FSType it refuses with
// codes.FailedPrecondition. It is idempotent: a retry finding the same
// device (see checkStaged: by device number, or for file systems without
// one by source name and the mount ID this Mounter recorded) mounted there
// as the same file system type with the same per-mount flags and read-only
// setting returns nil; anything else at the target gives
// codes.AlreadyExists. A symlink in the target path gives
// codes.FailedPrecondition. A corrupt mount at the target is unmounted and
// replaced. A missing device gives codes.NotFound. xfs is mounted with
// nouuid, so a clone stages beside its source (see
// StageOptions.XFSUUIDCheck).
func (m *Mounter) Stage(ctx context.Context, o StageOptions) error {
	if o.FSType == "" {
		o.FSType = "ext4"
	}
	if err := checkPath("staging target", o.Target); err != nil {
		return err
	}
	if o.Device == "" || strings.HasPrefix(o.Device, "-") || strings.ContainsRune(o.Device, 0) {
		return errorf(codes.InvalidArgument, nil, "device %q is empty or starts with '-'", o.Device)
	}
	if !fsTypePattern.MatchString(o.FSType) {
		return errorf(codes.InvalidArgument, nil, "file system type %q is not a valid type name", o.FSType)
	}
	flags := append(append([]string{}, o.MountFlags...), o.SensitiveMountFlags...)
	if o.FSType == "xfs" && !o.XFSUUIDCheck && !slices.Contains(flags, "nouuid") {
		flags = append(flags, "nouuid") // see StageOptions.XFSUUIDCheck
	}
	opts, err := parseOptions(flags)
	if err != nil {
		return err
	}
	if o.ReadOnly {
		opts.flags |= unix.MS_RDONLY
	}
	isBlock, rdev, err := inspectDevice(o.Device)
	if err != nil {
		return err
	}
	if o.Encryption != nil {
		if !isBlock {
			return errorf(codes.InvalidArgument, nil, "encryption needs a block device, not %s", o.Device)
		}
		if o.Device, err = m.OpenEncrypted(ctx, o.Device, *o.Encryption, o.ReadOnly); err != nil {
			return err
		}
		if isBlock, rdev, err = inspectDevice(o.Device); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return ctxError(err, "stage %s", o.Target)
	}
	defer m.lock(o.Target)()
	if isBlock { // two targets must not race to format one device
		defer m.lock("device:" + o.Device)()
	}

	// Refuse a symlink in the target path, and create what is missing.
	tfd, err := openPath("staging target", o.Target, true)
	if err != nil {
		return err
	}
	unix.Close(tfd)
	done, err := m.checkStaged(ctx, o, opts, isBlock, rdev)
	if done || err != nil {
		return err
	}
	if isBlock {
		if err := m.formatIfBlank(ctx, o); err != nil {
			return err
		}
	}
	if needsHelper(o.FSType) {
		if err := m.helperMount(ctx, o); err != nil {
			return err
		}
		return m.rememberStaged(o.Target, isBlock)
	}
	// Mount onto the directory found without following symlinks.
	tfd, err = openPath("staging target", o.Target, false)
	if err != nil {
		return err
	}
	err = unix.Mount(o.Device, fdPath(tfd), o.FSType, opts.flags, opts.dataString())
	unix.Close(tfd)
	if err != nil {
		code := codes.Internal
		if errors.Is(err, unix.ENODEV) {
			code = codes.InvalidArgument
		}
		return errorf(code, err, "mount %s (%s) at %s", o.Device, o.FSType, o.Target)
	}
	if err := m.rememberStaged(o.Target, isBlock); err != nil {
		return err
	}
	m.log.InfoContext(ctx, "staged", "device", o.Device, "target", o.Target, "fstype", o.FSType,
		"options", o.MountFlags, "readOnly", o.ReadOnly)
	return nil
}

// inspectDevice tells a block device from a non-path source ("tmpfs",
// "server:/export").
func inspectDevice(dev string) (isBlock bool, rdev uint64, err error) {
	if !strings.HasPrefix(dev, "/") {
		return false, 0, nil
	}
	if err := checkPath("device", dev); err != nil {
		return false, 0, err
	}
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, 0, errorf(codes.NotFound, err, "device %s", dev)
		}
		return false, 0, errorf(codes.Internal, err, "stat device %s", dev)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return false, 0, errorf(codes.InvalidArgument, nil,
			"device %s is not a block device (attach an image file with block.AttachLoop first)", dev)
	}
	return true, st.Rdev, nil
}

// checkStaged looks at what is at the target already. done is true when the
// volume is staged there as asked: the same device (by device number for
// a block device; for a file system without one, by source name, and by
// the st_dev this Mounter recorded when it staged it, if it did), the same
// file system type, and the same per-mount flags and read-only setting.
func (m *Mounter) checkStaged(ctx context.Context, o StageOptions, opts parsedOptions, isBlock bool, rdev uint64) (done bool, err error) {
	mounted, err := m.probeTarget(ctx, o.Target)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(o.Target, 0o750); err != nil {
			return false, errorf(codes.Internal, err, "create staging target %s", o.Target)
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !mounted {
		return false, checkIsDir(o.Target)
	}
	mi, err := topMount(o.Target)
	if err != nil {
		return false, errorf(codes.Internal, err, "look up mount at %s", o.Target)
	}
	id, err := mountID(o.Target)
	if err != nil {
		return false, errorf(codes.Internal, err, "statx %s", o.Target)
	}
	same := fsTypeMatches(o.FSType, mi.FsType)
	if isBlock {
		dev := unix.Mkdev(uint32(mi.Major), uint32(mi.Minor))
		if dev != rdev {
			// Some file systems (btrfs) report an anonymous device number;
			// the mount's source then names the device.
			var src unix.Stat_t
			same = same && strings.HasPrefix(mi.Source, "/") && unix.Stat(mi.Source, &src) == nil &&
				src.Mode&unix.S_IFMT == unix.S_IFBLK && src.Rdev == rdev
		}
	} else {
		same = same && mi.Source == o.Device
		if rec, ok := m.recorded(o.Target); ok && rec != id {
			same = false // another mount of the same name replaced ours
		}
	}
	if !same {
		return false, errorf(codes.AlreadyExists, nil,
			"staging target %s is already mounted from %s (%s, device %d:%d), not from %s (%s)",
			o.Target, mi.Source, mi.FsType, mi.Major, mi.Minor, o.Device, o.FSType)
	}
	if err := checkFlags(o.Target, msToST(opts.flags), !needsHelper(o.FSType)); err != nil {
		return false, err
	}
	if !isBlock {
		m.remember(o.Target, id)
	}
	return true, nil
}

// rememberStaged records the mount ID of a device-less file system just
// staged at target.
func (m *Mounter) rememberStaged(target string, isBlock bool) error {
	if isBlock {
		return nil
	}
	id, err := mountID(target)
	if err != nil {
		return errorf(codes.Internal, err, "statx %s", target)
	}
	m.remember(target, id)
	return nil
}

// mountID returns the ID of the mount at path: the 64-bit ID that is never
// reused (Linux 6.8+), else the classic one (reused once freed, so a
// replacement is seen only while the old ID is still taken).
func mountID(path string) (uint64, error) {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC,
		unix.STATX_MNT_ID_UNIQUE|unix.STATX_MNT_ID, &stx)
	if err != nil {
		return 0, err
	}
	return stx.Mnt_id, nil
}

// fsTypeMatches reports whether the type mountinfo shows is the one asked
// for; "nfs" may come out as "nfs4".
func fsTypeMatches(want, have string) bool {
	return want == have || want == "nfs" && have == "nfs4"
}

func checkIsDir(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return errorf(codes.Internal, err, "inspect %s", p)
	}
	if !fi.IsDir() {
		return errorf(codes.FailedPrecondition, nil, "target %s is a %s, want a directory", p, fi.Mode().Type())
	}
	return nil
}

// topMount returns the mountinfo entry of the top mount at target.
func topMount(target string) (mountutils.MountInfo, error) {
	infos, err := mountutils.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		return mountutils.MountInfo{}, err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		if infos[i].MountPoint == target {
			return infos[i], nil
		}
	}
	return mountutils.MountInfo{}, errors.New("not in /proc/self/mountinfo")
}

// DiskFormat returns the file system type on device as blkid reports it
// ("" for a blank device), through mount-utils' detection; a partition
// table is reported as a non-empty pseudo type.
func (m *Mounter) DiskFormat(ctx context.Context, device string) (string, error) {
	sfm := &mountutils.SafeFormatAndMount{Exec: execAdapter{ctx: ctx, run: m.run}}
	format, err := sfm.GetDiskFormat(device)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctxError(ctx.Err(), "detect format of %s", device)
		}
		return "", errorf(codes.Internal, err, "detect format of %s", device)
	}
	return format, nil
}

func (m *Mounter) formatIfBlank(ctx context.Context, o StageOptions) error {
	format, err := m.DiskFormat(ctx, o.Device)
	if err != nil {
		return err
	}
	switch {
	case format == o.FSType:
		if err := m.fsck(ctx, o); err != nil {
			return err
		}
		return m.growOffline(ctx, o)
	case format != "":
		return errorf(codes.FailedPrecondition, nil,
			"device %s already holds %q, want %q: refusing to format it", o.Device, format, o.FSType)
	case o.ReadOnly:
		return errorf(codes.FailedPrecondition, nil,
			"device %s is blank and the volume is read-only: refusing to format it", o.Device)
	}
	args := append([]string{}, o.FormatOptions...)
	if strings.HasPrefix(o.FSType, "ext") {
		args = append([]string{"-F", "-m0"}, args...)
	}
	args = append(args, o.Device)
	m.log.InfoContext(ctx, "formatting", "device", o.Device, "fstype", o.FSType, "args", args)
	if out, err := m.run.Run(ctx, "mkfs."+o.FSType, args...); err != nil {
		if ctx.Err() != nil {
			return ctxError(ctx.Err(), "format %s", o.Device)
		}
		if msg, full := storageFull(o.Device, o.Device, out, err); full {
			return errorf(codes.ResourceExhausted, err, "format %s as %s: %s: free space there, or create the volume where there is room, and retry%s",
				o.Device, o.FSType, msg, outputSuffix(out, err))
		}
		return errorf(codes.Internal, err, "format %s as %s%s", o.Device, o.FSType, outputSuffix(out, err))
	}
	return nil
}

// fsck checks and repairs an existing ext2/3/4 file system before it is
// mounted read-write, as kubelet's mount-utils does: corrected errors are
// logged, errors fsck could not correct refuse the stage, and a failure to
// run fsck at all is logged and does not block the mount.
func (m *Mounter) fsck(ctx context.Context, o StageOptions) error {
	if o.ReadOnly || !strings.HasPrefix(o.FSType, "ext") {
		return nil
	}
	out, err := m.run.Run(ctx, "fsck", "-a", o.Device)
	var ee *ExitError
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctxError(ctx.Err(), "fsck %s", o.Device)
	case errors.As(err, &ee) && (ee.Code == 1 || ee.Code == 2):
		m.log.WarnContext(ctx, "fsck corrected errors", "device", o.Device, "output", summary(out, err))
		return nil
	case errors.As(err, &ee) && ee.Code&4 != 0:
		return errorf(codes.FailedPrecondition, err,
			"file system on %s has errors fsck could not correct: repair it by hand%s", o.Device, outputSuffix(out, err))
	default:
		m.log.WarnContext(ctx, "fsck failed to run; mounting anyway", "device", o.Device, "err", err)
		return nil
	}
}

// needsHelper reports whether fstype is mounted through mount(8) and a
// mount.<type> helper rather than the mount syscall.
func needsHelper(fstype string) bool {
	base, _, _ := strings.Cut(fstype, ".")
	if helperFSTypes[base] || base != fstype {
		return true
	}
	for _, dir := range []string{"/sbin", "/usr/sbin", "/usr/local/sbin"} {
		if _, err := os.Stat(filepath.Join(dir, "mount."+fstype)); err == nil {
			return true
		}
	}
	return false
}

func (m *Mounter) helperMount(ctx context.Context, o StageOptions) error {
	all := append(append([]string{}, o.MountFlags...), o.SensitiveMountFlags...)
	if o.ReadOnly {
		all = append(all, "ro")
	}
	args := []string{"-t", o.FSType}
	if len(all) > 0 {
		args = append(args, "-o", strings.Join(all, ","))
	}
	args = append(args, o.Device, o.Target)
	if out, err := m.run.Run(ctx, "mount", args...); err != nil {
		if ctx.Err() != nil {
			return ctxError(ctx.Err(), "mount %s", o.Target)
		}
		// The output of a helper may echo options; report only a summary.
		msg := outputSuffix(out, err)
		if len(o.SensitiveMountFlags) > 0 {
			msg = " (output withheld: sensitive mount options)"
		}
		return errorf(codes.Internal, err, "mount %s (%s) at %s%s", o.Device, o.FSType, o.Target, msg)
	}
	m.log.InfoContext(ctx, "staged", "device", o.Device, "target", o.Target, "fstype", o.FSType,
		"options", o.MountFlags, "readOnly", o.ReadOnly, "helper", true)
	return nil
}

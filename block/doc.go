// Package block holds helpers for raw block volumes: the target file a block
// volume is published on, bind-mounting a device node onto it, device sizes,
// loop devices, zeroing a range (ZeroRange) and copying a volume with its
// holes kept (CopySparse).
//
// Invariants:
//
//   - Every path argument must be absolute and clean (filepath.Clean leaves it
//     unchanged); anything else is rejected with codes.InvalidArgument before
//     the file system is touched, so a request cannot steer a call with "..".
//   - No symlink in a target path is followed, in a parent or as the last
//     component: EnsureBlock, MountBlock and UnmountBlock open the path
//     component by component with O_NOFOLLOW (internal/safepath), create
//     and remove relative to the parent's descriptor, and bind through
//     /proc/self/fd/N; a symlink gives codes.FailedPrecondition naming it.
//   - EnsureBlock and MountBlock are idempotent: a retry with the same
//     arguments succeeds without stacking a second mount; a target that is a
//     directory, or bound to a different device, is refused with a gRPC code
//     (FailedPrecondition, AlreadyExists) a driver can return as-is.
//   - UnmountBlock removes the bind mount and then the target, only once it
//     is no longer a mount point and only if it is an empty regular file
//     (what EnsureBlock makes); a directory, a file holding data, a symlink
//     or a device node is left in place with codes.FailedPrecondition.
//   - Sizes come from the BLKGETSIZE64 ioctl, never from statfs (which on a
//     device node reports the size of the file system holding /dev).
//   - Loop devices are attached, found and detached through ioctls on
//     /dev/loop-control and /dev/loopN (LOOP_CTL_GET_FREE, LOOP_CONFIGURE with
//     a LOOP_SET_FD/LOOP_SET_STATUS64 fallback, LOOP_GET_STATUS64,
//     LOOP_CLR_FD); no losetup output is parsed. A device may map part of
//     its file (LoopOptions.Offset, SizeLimit); devices on one file at
//     different ranges are different devices. FindLoopAt picks candidates
//     from sysfs alone (backing_file, offset, sizelimit: the file's current
//     path, so a renamed file is still found; a file of the same name when
//     no path matches, for a file reached through another mount) and asks
//     the kernel, by LOOP_GET_STATUS64 and the file's device and inode
//     number, only about those: a device whose backing file hangs cannot
//     hang the search for another file.
//   - DetachLoop never reports success for a device still in use: the kernel
//     answers LOOP_CLR_FD on an open or mounted device with success and only
//     sets autoclear, so DetachLoop reads the status back, restores the
//     flags and returns codes.FailedPrecondition naming the device.
//   - ZeroRange and CopySparse take the device or file by path and open it
//     O_PATH|O_NOFOLLOW before reopening it through /proc/self/fd: a
//     symlink swapped in is refused (codes.FailedPrecondition), never
//     followed to another device; a device they write is opened O_EXCL,
//     so one with a mounted file system is refused too. Zeroing prefers
//     the kernel (BLKZEROOUT, fallocate PUNCH_HOLE/ZERO_RANGE) and falls
//     back to writing zeros; both return once the bytes are durable.
//   - Errors carry gRPC codes through a GRPCStatus method and still unwrap to
//     the underlying errno, so errors.Is(err, unix.EBUSY) keeps working.
//   - The package keeps no global state; the mount-point check is O(1)
//     (statx STATX_ATTR_MOUNT_ROOT, then openat2 RESOLVE_NO_XDEV) and reads
//     /proc/self/mountinfo only on kernels too old for either.
//
// An encrypted raw block volume is published the same way: its stage opens
// the dm-crypt mapping (mount.Mounter.OpenEncrypted, package crypt) and
// MountBlock binds the mapping's node (/dev/mapper/<crypt.MappingName>),
// never the ciphertext device; unstage closes it (CloseEncrypted) and
// expansion grows it (ResizeEncrypted).
//
// Everything except the error type is Linux-only; on other systems the
// functions exist and return codes.Unimplemented, so code using the package
// still builds.
package block

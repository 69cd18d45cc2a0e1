// Package mount holds the node-side path helpers of a CSI driver: staging a
// file system (format if blank, then mount), publishing it (bind mount,
// read-only when asked), unpublishing and unstaging it, fast mount-point
// checks and online file system expansion. It wraps k8s.io/mount-utils so a
// driver never imports that package itself.
//
// Use one Mounter per driver, built by New with Options (an injectable
// Runner for external commands, a *slog.Logger).
//
// Invariants:
//
//   - Paths are checked before anything is touched: absolute and clean, or
//     codes.InvalidArgument. Commands run with argv, never through a shell.
//   - No symlink in a target, staging or source path is ever followed, in a
//     parent or as the last component: paths are opened component by
//     component with O_NOFOLLOW (missing directories made with mkdirat
//     beside them), and mount(2) is given the descriptors found
//     (/proc/self/fd/N), so a mount lands exactly where the CO meant. A
//     symlink is refused with codes.FailedPrecondition naming it
//     (FailedPrecondition rather than InvalidArgument: the request is well
//     formed, the node's file system is not in the state it needs). A
//     kubelet root directory reached through a symlink must be configured
//     by its real path.
//   - Publish takes only mount flags a bind mount can apply (per-mount
//     flags: ro, nosuid, nodev, noexec, the atime ones); file-system
//     options and flags of a whole file system (sync, dirsync, lazytime),
//     which a bind remount would silently ignore, are refused with
//     codes.InvalidArgument (CheckBindFlags, also for drivers whose stage
//     is a bind).
//   - Publish binds only a staging path that is a mount point (and, with
//     PublishOptions.SourceDevice, a mount of that device), else
//     codes.FailedPrecondition: an unstaged volume would expose the node's
//     disk. Drivers publishing plain directories of their own say so with
//     PublishOptions.AllowUnmountedSource.
//   - StageOptions.Encryption stages an encrypted volume (package crypt):
//     the device is formatted with LUKS2 only when blank, opened as a
//     dm-crypt mapping named after the volume, and the file system lives
//     on the mapping; UnmountOptions.Encryption closes it after the
//     unmount, ResizeOptions.Encryption grows it before the file system.
//     Raw block volumes use OpenEncrypted and CloseEncrypted. A wrong key
//     is codes.InvalidArgument with the device untouched.
//   - A device is formatted only when blkid finds nothing on it. A device
//     holding another file system, a partition table, or a blank device
//     staged read-only, is refused with codes.FailedPrecondition. An existing
//     ext2/3/4 file system is checked with "fsck -a" before a read-write
//     mount; errors fsck cannot correct refuse the stage the same way.
//   - Every operation is idempotent: a retry that finds the result in place
//     succeeds; a target holding something else gives codes.AlreadyExists
//     and is left as it is. "The result" means the same file system by
//     identity, not by name — the device number for a block device (from
//     mountinfo, or the mount's source device for btrfs-like file systems),
//     the same directory (device and inode) for a bind, and for a
//     file system without a device (tmpfs, nfs) the source name plus the
//     mount ID this Mounter recorded when it staged it — the same file
//     system type, and the same per-mount flags (ro, nosuid, nodev, noexec,
//     noatime, nodiratime; for file systems mounted through a helper only
//     the requested ones, as helpers add their own). File-system options
//     (size=, discard, ...) are not compared: the kernel rewrites them. After
//     a restart a Mounter has no record of a device-less mount and accepts
//     one with the same source name, type and flags: give each such volume
//     a distinct source name (tmpfs takes any, e.g. the volume ID) when
//     that matters. Mounts are never stacked: calls on one target are
//     serialized inside a Mounter and the target is checked first.
//   - Nothing is ever removed recursively. After unmounting, Unpublish
//     removes only what a publish creates: an empty directory or an empty
//     regular file (a block volume's target). A directory holding files, a
//     file holding data, a symlink or any other file type is left in place
//     with codes.FailedPrecondition.
//   - Corrupt mounts (ENOTCONN after a FUSE server died, ESTALE, EIO) are
//     unmounted by Unpublish and Unstage and replaced by Stage and Publish.
//   - Bind, remount, tmpfs and block-device mounts and all unmounts use the
//     mount syscalls; mount(8) runs only for file systems that need a helper
//     (nfs, cifs, ceph, fuse.*, or any type with a mount.<type> program).
//     Publish and Unpublish never read the mount table; mount-point checks
//     cost one statx (or openat2) call however many mounts the node has.
//   - External commands (blkid, fsck, mkfs.*, resize2fs, xfs_growfs, mount) run
//     through the Runner with the call's context, so a deadline ends them
//     (ExecRunner uses command.Run, which kills the tool's whole process
//     group, helpers it forked included). The exception is resize2fs
//     growing a file system offline (GrowOffline, StageOptions.Grow): killed
//     part way it can cost the file system its journal, so it runs to the
//     end (at most ten minutes) and the call then reports the context's end.
//     A failure's message names the tool's reason (Summarize): the first
//     meaningful lines of its stderr, not its version banner, usage text or
//     progress on stdout.
//   - Growing a mounted file system needs a capability of the process
//     (CAP_SYS_RESOURCE for ext4, CAP_SYS_ADMIN for xfs): CanResizeOnline
//     says whether it is held, and Resize's failure names the missing one.
//   - Sensitive mount options are never logged or put into errors.
//   - Errors carry gRPC codes (a GRPCStatus method) and unwrap to their
//     cause, so a driver returns them from CSI handlers unchanged.
//
// On systems other than Linux the package builds, and every operation
// returns codes.Unimplemented.
package mount

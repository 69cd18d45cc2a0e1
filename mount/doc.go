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
//   - A device is formatted only when blkid finds nothing on it. A device
//     holding another file system, a partition table, or a blank device
//     staged read-only, is refused with codes.FailedPrecondition. An existing
//     ext2/3/4 file system is checked with "fsck -a" before a read-write
//     mount; errors fsck cannot correct refuse the stage the same way.
//   - Every operation is idempotent: a retry that finds the result in place
//     succeeds; a target holding something else gives codes.AlreadyExists
//     and is left as it is. Mounts are never stacked: calls on one target
//     are serialized inside a Mounter and the target is checked first.
//   - Nothing is ever removed recursively. Unpublish removes the target with
//     os.Remove after unmounting, so only a file or an empty directory can
//     go; a path that might still be a mount keeps its contents.
//   - Corrupt mounts (ENOTCONN after a FUSE server died, ESTALE, EIO) are
//     unmounted by Unpublish and Unstage and replaced by Stage and Publish.
//   - Bind, remount, tmpfs and block-device mounts and all unmounts use the
//     mount syscalls; mount(8) runs only for file systems that need a helper
//     (nfs, cifs, ceph, fuse.*, or any type with a mount.<type> program).
//     Publish and Unpublish never read the mount table; mount-point checks
//     cost one statx (or openat2) call however many mounts the node has.
//   - External commands (blkid, fsck, mkfs.*, resize2fs, xfs_growfs, mount) run
//     through the Runner with the call's context, so a deadline ends them.
//   - Sensitive mount options are never logged or put into errors.
//   - Errors carry gRPC codes (a GRPCStatus method) and unwrap to their
//     cause, so a driver returns them from CSI handlers unchanged.
//
// On systems other than Linux the package builds, and every operation
// returns codes.Unimplemented.
package mount

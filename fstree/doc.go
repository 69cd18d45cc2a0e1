// Package fstree holds safe file-tree helpers for drivers that keep volumes
// as directories on a node file system (hostpath and local-path-style
// drivers): Remove deletes a volume's tree, Copy clones one (for a snapshot
// or a volume created from a source), Usage measures one.
//
// A volume's contents belong to its workload, which may be hostile and may
// keep changing the tree while a helper runs. So the helpers promise:
//
//   - No symlink is ever followed below the root. Every entry is opened
//     relative to its parent's descriptor with openat2 RESOLVE_NO_SYMLINKS
//     and RESOLVE_NO_XDEV (and O_NOFOLLOW), never by a path
//     string, so swapping a file or directory for a symlink mid-walk cannot
//     steer a read, a write or a removal outside the tree. Copy copies a
//     symlink as a symlink and never opens it. The root path itself (the
//     driver's own path) is resolved normally, except that its last
//     component must not be a symlink.
//   - No mount boundary is ever crossed. Remove refuses with
//     codes.FailedPrecondition naming the mount when the root or anything
//     below it is a mount point (a pod's volume still published, a bind
//     mount an attacker could not make but a confused driver could), and
//     removes nothing below that mount: mounts are looked up before
//     anything is removed, and the walk itself cannot enter one. Copy
//     refuses the same way; Usage skips mounts (du -x).
//   - Copy is bounded and all-or-nothing: CopyOptions.MaxBytes limits the
//     data bytes written (holes are free and stay holes), exceeding it gives
//     codes.OutOfRange (the CSI spec's code for a volume smaller than its
//     source), running out of space codes.ResourceExhausted; on any error
//     what Copy made at the destination is removed again, and a new
//     destination is built under a hidden sibling name and renamed into
//     place when complete, so not even a SIGKILL leaves a half copy there.
//   - Long walks honour ctx: a cancelled context ends them with
//     codes.Canceled or codes.DeadlineExceeded.
//   - Errors carry gRPC codes (a GRPCStatus method) and unwrap to their
//     errno, so a driver returns them from a CSI handler unchanged.
//
// A walk holds at most 16 directory descriptors open (Copy 32: source and
// destination), however deep the tree: going back up to a directory whose
// descriptor it closed, it re-opens it through ".." (or by name from the
// root, one component at a time, with the same refusals) and checks it is
// the very directory it left (device and inode), else ends with
// codes.Aborted. Remove and Usage walk trees of any depth (with a stack of
// their own, not the goroutine's); Copy refuses a source more than 16,384
// directories deep with codes.FailedPrecondition.
//
// On systems other than Linux the package builds, and every function
// returns codes.Unimplemented.
package fstree

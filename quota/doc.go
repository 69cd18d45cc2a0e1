// Package quota sets and reads filesystem project quotas, the kernel's way
// to cap the bytes a directory tree may hold: a directory gets a project ID
// that its new files and subdirectories inherit, and the project gets a
// hard limit, so writes beyond it fail with ENOSPC and statfs on the
// directory reports the limit as the filesystem's size. Directory-backed
// volumes (hostpath-style drivers, local PV provisioners) use it to make
// their capacity real.
//
// Project quotas exist on xfs mounted with prjquota (or pquota) and on
// ext4 made with the project and quota features and mounted with
// prjquota. Check tells whether a path's filesystem enforces them.
//
// Invariants: it runs syscalls only — quotactl_fd(2) (Linux 5.14+) on a
// descriptor of the path, and the FS_IOC_FSGETXATTR/FS_IOC_FSSETXATTR
// ioctls — never a quota tool or a shell; paths are opened with O_NOFOLLOW,
// so a symlink planted at the final element is refused, not followed. It
// keeps no state: which project ID belongs to which directory is the
// caller's record. Errors carry gRPC codes (FailedPrecondition when the
// filesystem has no enforced project quotas, InvalidArgument for a bad
// path or ID, NotFound for a missing path, Internal otherwise). On other
// systems every function returns Unimplemented.
package quota

// Package quota sets and reads filesystem project quotas, the kernel's way
// to cap the bytes a directory tree may hold: a directory gets a project ID
// that its new files and subdirectories inherit, and the project gets a
// hard limit, so writes beyond it fail with ENOSPC and statfs on the
// directory reports the limit as the filesystem's size. Directory-backed
// volumes (hostpath-style drivers, local PV provisioners) use it to make
// their capacity real.
//
// A project quota holds only against a writer who cannot change a file's
// project ID. The kernel lets FS_IOC_FSSETXATTR change it for the file's
// owner and for a process with CAP_FOWNER, as long as the caller is in
// the initial user namespace; from any other user namespace the change
// fails with EINVAL. So a tenant outside a user namespace moves its own
// files out of the volume's project — to project 0, which has no limit —
// with one ioctl ("chattr -p 0", "xfs_io -c chproj"), and a root pod with
// CAP_FOWNER (the default for root and privileged containers) does so for
// any file; from then on their bytes count against no limit. Where the
// limit must hold against the tenant, run its pods in a user namespace
// (Kubernetes: hostUsers: false), which leaves project IDs unchangeable
// to them whatever their uid; runAsNonRoot alone is not enough, since a
// file's owner may change its project ID too.
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

// Package mountpoint tells whether a path is the root of a mount in O(1):
// statx STATX_ATTR_MOUNT_ROOT (Linux 5.8+), else openat2 with
// RESOLVE_NO_XDEV (5.6+), and only on older kernels a scan of
// /proc/self/mountinfo. It is shared by mount/ and block/, which wrap it in
// their public APIs. It also reads /proc/self/mountinfo as a list (List,
// which MountInfo uses, and Under for the mounts at or below a directory in
// unmount order) for fstree's old-kernel fallback and the sanity harnesses.
// (internal/pathstat parses the file for mount IDs and options, and
// mount/ through k8s.io/mount-utils.)
package mountpoint

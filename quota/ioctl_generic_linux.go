//go:build linux && !(mips || mipsle || mips64 || mips64le || ppc || ppc64 || ppc64le || sparc || sparc64)

package quota

// The fsxattr ioctls, _IOR('X', 31, struct fsxattr) and
// _IOW('X', 32, struct fsxattr), in the generic ioctl encoding.
const (
	fsIocFsGetXattr = 0x801c581f
	fsIocFsSetXattr = 0x401c5820
)

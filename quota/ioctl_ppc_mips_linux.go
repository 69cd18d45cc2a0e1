//go:build linux && (mips || mipsle || mips64 || mips64le || ppc || ppc64 || ppc64le || sparc || sparc64)

package quota

// The fsxattr ioctls in the encoding of mips, powerpc and sparc, whose
// read and write direction bits differ from the generic ones.
const (
	fsIocFsGetXattr = 0x401c581f
	fsIocFsSetXattr = 0x801c5820
)

package mount

import (
	"fmt"

	"github.com/csikit/csikit/caps"
)

// ResizeCapability returns the capability the kernel requires of a process
// that grows a mounted file system of type fstype: CAP_SYS_RESOURCE for
// ext2/3/4 (the EXT4_IOC_RESIZE_FS that resize2fs issues) and CAP_SYS_ADMIN
// for xfs (xfs_growfs's XFS_IOC_FSGROWFSDATA). ok is false for a type
// Resize does not grow.
func ResizeCapability(fstype string) (c caps.Cap, ok bool) {
	switch fstype {
	case "ext2", "ext3", "ext4":
		return caps.SysResource, true
	case "xfs":
		return caps.SysAdmin, true
	}
	return 0, false
}

// CanResizeOnline reports whether Resize can grow a mounted file system of
// type fstype in this process: the type is one Resize grows and the process
// holds ResizeCapability(fstype) in its effective set. A driver can warn at
// start-up, or leave EXPAND_VOLUME out of its node capabilities, and a test
// can skip the online-growth cases, without probing capabilities by hand.
// It reports false when the capabilities cannot be read.
func CanResizeOnline(fstype string) bool {
	c, ok := ResizeCapability(fstype)
	if !ok {
		return false
	}
	has, err := caps.Has(c)
	return err == nil && has
}

// missingCapability is a note for a failed resize of fstype when this
// process lacks the capability the kernel requires for it, else "".
func missingCapability(fstype string) string {
	c, ok := ResizeCapability(fstype)
	if !ok {
		return ""
	}
	if has, err := caps.Has(c); err != nil || has {
		return ""
	}
	return fmt.Sprintf(" (this process lacks %s, which growing a mounted %s needs: add %s to the node plugin container's securityContext.capabilities, or run it privileged)",
		c, fstype, c.Kubernetes())
}

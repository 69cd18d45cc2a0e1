// Package caps reports which Linux capabilities (capabilities(7)) this
// process holds in its effective set — the ones the kernel checks — so a
// driver can say at start-up, or a test decide up front, what it will be
// refused. These are process privileges, not the CSI capabilities a driver
// advertises (see csikit.Capabilities).
//
// A node plugin usually runs privileged with every capability; a sandbox
// or a tightened securityContext drops some. Online growth of a mounted
// file system is the common casualty: ext4's needs CAP_SYS_RESOURCE and
// xfs's CAP_SYS_ADMIN (mount.CanResizeOnline asks for the right one).
//
//	if ok, err := caps.Has(caps.SysResource); err == nil && !ok {
//		logger.Warn("no CAP_SYS_RESOURCE: online ext4 expansion will fail")
//	}
package caps

import (
	"fmt"
	"strings"
)

// Cap is a capability by its number in linux/capability.h.
type Cap int

// The capabilities a storage driver meets most.
const (
	// Chown is CAP_CHOWN: change any file's owner (fsGroup, volume roots).
	Chown Cap = 0
	// DacOverride is CAP_DAC_OVERRIDE: bypass file permission checks.
	DacOverride Cap = 1
	// Fowner is CAP_FOWNER: bypass owner checks (chmod, utimes, xattrs).
	Fowner Cap = 3
	// SysAdmin is CAP_SYS_ADMIN: mount, unmount, loop devices, xfs_growfs,
	// project quotas.
	SysAdmin Cap = 21
	// SysResource is CAP_SYS_RESOURCE: grow a mounted ext4 (resize2fs
	// online), write past ext4's reserved blocks and quota limits.
	SysResource Cap = 24
	// Mknod is CAP_MKNOD: create device nodes (raw block publish).
	Mknod Cap = 27
)

var names = map[Cap]string{
	Chown:       "CAP_CHOWN",
	DacOverride: "CAP_DAC_OVERRIDE",
	Fowner:      "CAP_FOWNER",
	SysAdmin:    "CAP_SYS_ADMIN",
	SysResource: "CAP_SYS_RESOURCE",
	Mknod:       "CAP_MKNOD",
}

// String is the capability's name as capabilities(7) spells it,
// "CAP_SYS_RESOURCE", or "CAP_<n>" for one this package does not name.
func (c Cap) String() string {
	if n, ok := names[c]; ok {
		return n
	}
	return fmt.Sprintf("CAP_%d", int(c))
}

// Kubernetes is the capability's name as a container's
// securityContext.capabilities.add spells it: "SYS_RESOURCE".
func (c Cap) Kubernetes() string { return strings.TrimPrefix(c.String(), "CAP_") }

// Has reports whether this process holds c in its effective set. It asks
// the kernel (capget(2)) on each call, so it sees a change the process made
// to itself. The error is non-nil only when the set cannot be read (not
// Linux, or c is out of range), and then the answer is false.
func Has(c Cap) (bool, error) {
	if c < 0 || c > 63 {
		return false, fmt.Errorf("caps: capability %d out of range", int(c))
	}
	eff, err := effective()
	if err != nil {
		return false, err
	}
	return eff&(1<<uint(c)) != 0, nil
}

// Missing returns those of want that this process lacks, in order: empty
// when it holds them all. When the set cannot be read it returns want and
// the error.
func Missing(want ...Cap) ([]Cap, error) {
	eff, err := effective()
	if err != nil {
		return want, err
	}
	var miss []Cap
	for _, c := range want {
		if c < 0 || c > 63 || eff&(1<<uint(c)) == 0 {
			miss = append(miss, c)
		}
	}
	return miss, nil
}

package mount

import (
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
)

// bindFlagNames are the mount options a bind mount can take: the
// per-mount flags the kernel keeps for each mount, not for its file
// system (MNT_READONLY, MNT_NOSUID, ... — the ones a bind remount applies).
var bindFlagNames = []string{
	"ro", "rw", "nosuid", "suid", "nodev", "dev", "noexec", "exec",
	"noatime", "atime", "nodiratime", "diratime", "relatime", "norelatime", "strictatime",
}

// ignoredOptions are fstab and mount(8) options the kernel never sees: a
// mount takes them as no-ops.
var ignoredOptions = []string{
	"defaults", "auto", "noauto", "nofail", "_netdev", "user", "nouser", "users", "owner", "group",
}

// CheckBindFlags refuses, with codes.InvalidArgument naming the option,
// any mount option that a bind mount cannot apply: file-system options
// ("size=1g", "discard", "errors=remount-ro"), flags that belong to the
// file system rather than to one mount of it ("sync", "dirsync",
// "lazytime" — a bind remount ignores them without an error, so a caller
// would believe they hold), options naming no flag any kernel knows, and
// bind, remount and propagation options (the Mounter chooses those).
//
// What it accepts are the per-mount flags (ro, rw, nosuid, suid, nodev,
// dev, noexec, exec, noatime, atime, nodiratime, diratime, relatime,
// norelatime, strictatime) and the fstab options the kernel never sees
// (defaults, nofail, x-*, comment=...). Publish applies it to
// PublishOptions.MountFlags; a driver whose stage is itself a bind (a
// directory-backed volume) calls it on the capability's mount_flags, so a
// StorageClass's mountOptions are refused instead of silently dropped.
func CheckBindFlags(flags []string) error {
	for _, f := range flags {
		o := strings.TrimSpace(f)
		switch {
		case o == "", slices.Contains(bindFlagNames, o), slices.Contains(ignoredOptions, o),
			strings.HasPrefix(o, "x-"), strings.HasPrefix(o, "comment="):
			continue
		case strings.ContainsRune(o, 0):
			return errorf(codes.InvalidArgument, nil, "mount option contains a NUL byte")
		}
		switch o {
		case "bind", "rbind", "remount", "move", "shared", "rshared", "slave", "rslave",
			"private", "rprivate", "unbindable", "runbindable":
			return errorf(codes.InvalidArgument, nil, "mount option %q is not allowed: the mounter chooses bind, remount and propagation itself", o)
		case "sync", "dirsync", "lazytime", "nolazytime", "async", "mand", "nomand", "silent", "loud", "iversion", "noiversion":
			return errorf(codes.InvalidArgument, nil,
				"mount option %q applies to a whole file system and a bind mount cannot take it: a bind mount takes only %s", o, strings.Join(bindFlagNames, ", "))
		}
		return errorf(codes.InvalidArgument, nil,
			"mount option %q cannot apply to a bind mount (a file-system option, or none the kernel knows): a bind mount takes only %s", o, strings.Join(bindFlagNames, ", "))
	}
	return nil
}

// BindFlags returns the flags of flags that a bind mount can carry, in
// order: those CheckBindFlags accepts one by one. A filesystem volume's
// NodePublishVolume passes its capability's mount_flags through it: the
// stage mounted the filesystem with all of them, and the publish bind
// repeats the per-mount ones (ro, nosuid, noexec, noatime, ...), which a
// bind does not inherit. Flags of the filesystem ("discard", "data=...")
// are left to the stage.
func BindFlags(flags []string) []string {
	var out []string
	for _, f := range flags {
		if CheckBindFlags([]string{f}) == nil {
			out = append(out, f)
		}
	}
	return out
}

//go:build linux

package mount

import (
	"strings"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
)

// flagOption is a mount option the kernel takes as a MS_* flag.
type flagOption struct {
	clear bool // the option turns the flag off ("rw", "suid", ...)
	flag  uintptr
}

var flagOptions = map[string]flagOption{
	"ro": {false, unix.MS_RDONLY}, "rw": {true, unix.MS_RDONLY},
	"nosuid": {false, unix.MS_NOSUID}, "suid": {true, unix.MS_NOSUID},
	"nodev": {false, unix.MS_NODEV}, "dev": {true, unix.MS_NODEV},
	"noexec": {false, unix.MS_NOEXEC}, "exec": {true, unix.MS_NOEXEC},
	"sync": {false, unix.MS_SYNCHRONOUS}, "async": {true, unix.MS_SYNCHRONOUS},
	"dirsync": {false, unix.MS_DIRSYNC},
	"noatime": {false, unix.MS_NOATIME}, "atime": {true, unix.MS_NOATIME},
	"nodiratime": {false, unix.MS_NODIRATIME}, "diratime": {true, unix.MS_NODIRATIME},
	"relatime": {false, unix.MS_RELATIME}, "norelatime": {true, unix.MS_RELATIME},
	"strictatime": {false, unix.MS_STRICTATIME},
	"lazytime":    {false, unix.MS_LAZYTIME}, "nolazytime": {true, unix.MS_LAZYTIME},
	"silent": {false, unix.MS_SILENT}, "loud": {true, unix.MS_SILENT},
}

// userspaceOptions are fstab/mount(8) options the kernel never sees.
var userspaceOptions = map[string]bool{
	"defaults": true, "auto": true, "noauto": true, "nofail": true, "_netdev": true,
	"user": true, "nouser": true, "users": true, "owner": true, "group": true,
}

// parsedOptions is a list of mount options split into what the mount
// syscall takes.
type parsedOptions struct {
	flags uintptr
	data  []string // file-system specific options, in order
}

// parseOptions splits options into MS_* flags and file-system data. Options
// that mount(2) cannot express (bind, remount, propagation) are refused:
// the Mounter decides those itself.
func parseOptions(options []string) (parsedOptions, error) {
	var p parsedOptions
	for _, o := range options {
		o = strings.TrimSpace(o)
		if o == "" || userspaceOptions[o] || strings.HasPrefix(o, "x-") || strings.HasPrefix(o, "comment=") {
			continue
		}
		if f, ok := flagOptions[o]; ok {
			if f.clear {
				p.flags &^= f.flag
			} else {
				p.flags |= f.flag
			}
			continue
		}
		switch o {
		case "bind", "rbind", "remount", "move", "shared", "rshared", "slave", "rslave",
			"private", "rprivate", "unbindable", "runbindable":
			return p, errorf(codes.InvalidArgument, nil, "mount option %q is not allowed: the mounter chooses bind, remount and propagation itself", o)
		}
		if strings.ContainsRune(o, 0) {
			return p, errorf(codes.InvalidArgument, nil, "mount option contains a NUL byte")
		}
		p.data = append(p.data, o)
	}
	return p, nil
}

// dataString joins file-system options for the mount syscall.
func (p parsedOptions) dataString() string { return strings.Join(p.data, ",") }

// statfsFlags maps the ST_* flags statfs reports for a mount to the MS_*
// flags a bind remount must repeat to keep them.
func statfsFlags(f int64) uintptr {
	var flags uintptr
	for st, ms := range map[int64]uintptr{
		unix.ST_RDONLY: unix.MS_RDONLY, unix.ST_NOSUID: unix.MS_NOSUID,
		unix.ST_NODEV: unix.MS_NODEV, unix.ST_NOEXEC: unix.MS_NOEXEC,
		unix.ST_NOATIME: unix.MS_NOATIME, unix.ST_NODIRATIME: unix.MS_NODIRATIME,
		unix.ST_RELATIME: unix.MS_RELATIME,
	} {
		if f&st != 0 {
			flags |= ms
		}
	}
	return flags
}

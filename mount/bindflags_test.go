package mount_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/mount"
)

// TestCheckBindFlags: the per-mount flags and the options the kernel never
// sees pass; flags of a whole file system, file-system options, unknown
// options and the mounter's own (bind, propagation) are InvalidArgument,
// naming the option.
func TestCheckBindFlags(t *testing.T) {
	for _, ok := range [][]string{
		nil, {}, {"ro"}, {"rw", "nosuid", "nodev", "noexec", "noatime", "nodiratime", "relatime"},
		{"suid", "dev", "exec", "atime", "diratime", "norelatime", "strictatime"},
		{"defaults", "nofail", "_netdev", "x-systemd.automount", "comment=x", " noexec ", ""},
	} {
		if err := mount.CheckBindFlags(ok); err != nil {
			t.Errorf("CheckBindFlags(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{
		"sync", "dirsync", "lazytime", "mand", "size=1m", "discard", "errors=remount-ro", "nouuid",
		"sanity-no-such-mount-option", "bind", "rbind", "remount", "rshared", "private", "a\x00b",
	} {
		err := mount.CheckBindFlags([]string{"noexec", bad})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("CheckBindFlags(%q) = %v, want InvalidArgument", bad, err)
			continue
		}
		if !strings.Contains(bad, "\x00") && !strings.Contains(err.Error(), bad) {
			t.Errorf("CheckBindFlags(%q) = %q, want the option named", bad, err)
		}
	}
}

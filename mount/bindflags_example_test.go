package mount_test

import (
	"fmt"

	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/mount"
)

// A driver whose stage is a bind of a directory checks the capability's
// mount_flags first: a StorageClass's mountOptions either hold or are
// refused, never dropped.
func ExampleCheckBindFlags() {
	for _, flags := range [][]string{{"noexec", "nosuid"}, {"noexec", "sync"}} {
		err := mount.CheckBindFlags(flags)
		fmt.Println(flags, status.Code(err))
	}
	// Output:
	// [noexec nosuid] OK
	// [noexec sync] InvalidArgument
}

// A filesystem volume's publish binds the staged filesystem with the
// per-mount flags of its capability; the filesystem's own options stayed
// with the stage.
func ExampleBindFlags() {
	fmt.Println(mount.BindFlags([]string{"noatime", "discard", "nosuid", "data=ordered", "x-systemd.automount"}))
	// Output:
	// [noatime nosuid x-systemd.automount]
}

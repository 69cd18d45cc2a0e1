package mount_test

import (
	"fmt"

	"github.com/csikit/csikit/mount"
)

// A node plugin checks at start-up that it can grow the file systems it
// stages, and says which capability to grant when it cannot — the same
// check a test uses to skip online-growth cases.
func ExampleCanResizeOnline() {
	for _, fstype := range []string{"ext4", "xfs"} {
		if !mount.CanResizeOnline(fstype) {
			c, _ := mount.ResizeCapability(fstype)
			fmt.Printf("online expansion of %s will fail: grant %s (securityContext capability %s)\n",
				fstype, c, c.Kubernetes())
		}
	}
}

// Summarize turns a failed tool's streams into the reason for an error
// message: here mkfs.xfs's refusal of a small device, without the usage
// text it prints after it.
func ExampleSummarize() {
	stderr := []byte("Filesystem must be larger than 300MB.\nUsage: mkfs.xfs\n/* blocksize */\t\t[-b size=num]\n")
	fmt.Println(mount.Summarize(nil, stderr))
	// Output: Filesystem must be larger than 300MB.
}

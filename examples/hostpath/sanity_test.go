//go:build linux

package main_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/sanity"
)

// EndpointEnv opts in to TestSanityEndpoint (.ci/run sets it in a step of
// its own): it builds the driver and runs the whole harness once per
// volume kind, minutes that make test need not spend again.
const EndpointEnv = "CSIKIT_SANITY_ENDPOINT"

// TestSanityEndpoint runs csikit's harness by endpoint against the
// hostpath binary, as a CO meets it (its main package, flags and socket),
// once for every kind of volume a StorageClass can select: a directory
// (no fsType: the default StorageClass), ext4, xfs and a block volume.
// Each run restarts the process for the Restart area and scans its log
// for secrets.
func TestSanityEndpoint(t *testing.T) {
	if os.Getenv(EndpointEnv) == "" {
		t.Skip("opt-in: set " + EndpointEnv + "=1 (root, e2fsprogs, xfsprogs; .ci/run does)")
	}
	testenv.RequireRoot(t, "hostpath mounts filesystems and attaches loop devices")
	for _, c := range []string{"mkfs.ext4", "resize2fs", "mkfs.xfs", "xfs_growfs"} {
		testenv.RequireCommand(t, c, map[bool]string{true: "xfsprogs", false: "e2fsprogs"}[strings.Contains(c, "xfs")])
	}
	bin := csitest.Build(t, "github.com/csikit/csikit/examples/hostpath")
	for _, k := range []struct {
		name   string
		access sanity.AccessType
		params map[string]string
		size   int64
	}{
		{"directory", sanity.MountAccess, nil, 16 << 20},
		{"ext4", sanity.MountAccess, map[string]string{driver.ParamFSType: "ext4"}, 16 << 20},
		{"xfs", sanity.MountAccess, map[string]string{driver.ParamFSType: "xfs"}, 300 << 20}, // mkfs.xfs's minimum
		{"block", sanity.BlockAccess, nil, 16 << 20},
	} {
		t.Run(k.name, func(t *testing.T) {
			state := t.TempDir()
			p := csitest.StartProcess(t, bin, "--nodeid", "sanity-node", "--state-dir", state, "--log-level", "debug",
				"--enable-attach", "--enable-modify", "--mutable-parameters", "iops")
			start := time.Now()
			sanity.Run(t, sanity.Endpoint(p.Endpoint), sanity.Config{
				AccessType:        k.access,
				Skip:              resizeSkips(t),
				VolumeSize:        k.size,
				ExpandSize:        2 * k.size,
				Parameters:        k.params,
				MutableParameters: map[string]string{"iops": "100"},
				Restart:           p.Restart,
				Log:               p.Log,
				BackendObjects:    driver.StateObjects(state),
			})
			t.Logf("sanity by endpoint against hostpath (%s volumes) took %v", k.name, time.Since(start))
		})
	}
}

// resizeSkips skips the cases that grow an ext4 filesystem online when
// this process lacks CAP_SYS_RESOURCE, which EXT4_IOC_RESIZE_FS needs
// (resize2fs then fails with "Permission denied").
func resizeSkips(t *testing.T) map[string]string {
	skip := map[string]string{}
	if !mount.CanResizeOnline("ext4") {
		why := "ext4 online resize needs CAP_SYS_RESOURCE, which this test process lacks"
		skip["mount/Expansion/NodeExpandVolume/after_publish"] = why
		skip["mount/DataPath/expansion_visible_on_node"] = why
	}
	return skip
}

//go:build linux

package driver_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/csitest/vmtest"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/sanity"
)

// TestOnlineGrow runs the harness's expansion and data-path areas on ext4
// and xfs volumes with nothing skipped: NodeExpandVolume after publish
// grows the mounted file system (resize2fs, xfs_growfs) and
// expansion_visible_on_node sees it. Growing ext4 online needs
// CAP_SYS_RESOURCE (EXT4_IOC_RESIZE_FS); a process without it (this CI
// sandbox) runs the test in the VM lane (csitest/vmtest), as root with
// every capability on Debian's kernel.
func TestOnlineGrow(t *testing.T) {
	if !mount.CanResizeOnline("ext4") && vmtest.Delegate(t, vmOptions) {
		return
	}
	csitest.RequireRoot(t, "hostpath mounts filesystems and attaches loop devices")
	for _, c := range []string{"mkfs.ext4", "resize2fs", "mkfs.xfs", "xfs_growfs"} {
		csitest.RequireCommand(t, c, map[bool]string{true: "xfsprogs", false: "e2fsprogs"}[strings.Contains(c, "xfs")])
	}
	for _, k := range []struct {
		fs   string
		size int64
	}{{"ext4", 16 << 20}, {"xfs", 300 << 20}} {
		t.Run(k.fs, func(t *testing.T) {
			state := t.TempDir()
			log := &sanity.LogBuffer{}
			logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
			target := sanity.Restartable(func() (any, csikit.Options, error) {
				d, err := driver.New(context.Background(), driver.Options{StateDir: state, NodeID: "grow-node", Logger: logger})
				if err != nil {
					return nil, csikit.Options{}, err
				}
				return d, csikit.Options{
					Name: "hostpath.csikit.dev", Version: "v0.0.0-grow", NodeID: "grow-node",
					Topology:    map[string]string{driver.TopologyKey: "grow-node"},
					VolumeModes: csikit.Mount | csikit.Block, AccessModes: driver.AccessModes(),
					Journal: d.Journal(), Logger: logger,
				}, nil
			})
			start := time.Now()
			sanity.Run(t, target, sanity.Config{
				Areas:          sanity.Identity | sanity.Expansion | sanity.DataPath,
				AccessType:     sanity.MountAccess,
				VolumeSize:     k.size,
				ExpandSize:     2 * k.size,
				Parameters:     map[string]string{driver.ParamFSType: k.fs},
				Log:            log.Bytes,
				BackendObjects: driver.StateObjects(state),
			})
			t.Logf("expansion and data path on %s took %v", k.fs, time.Since(start))
		})
	}
}

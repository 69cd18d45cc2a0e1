//go:build linux

package main_test

import (
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/sanity"
)

// requireNode skips without root and the node tools the rbd-fuse mapper
// and the file systems need.
func requireNode(t *testing.T) {
	t.Helper()
	cephtest.RequireRoot(t)
	for _, tool := range []string{"rbd-fuse", "mkfs.ext4", "resize2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			cephtest.Skipf(t, "needs %s", tool)
		}
	}
}

// TestSanity runs csikit's conformance harness against the driver on the
// real cluster, once per volume kind a StorageClass can select: ext4
// mount volumes (the default), xfs mount volumes (fsType: xfs, the
// capability naming no fs_type) and block volumes, with the rbd-fuse
// mapper (this CI kernel has no rbd or nbd module).
func TestSanity(t *testing.T) {
	c := cephtest.Require(t)
	requireNode(t)
	for _, kind := range []struct {
		name   string
		access sanity.AccessType
		fsType string            // the capability's fs_type
		params map[string]string // on top of the pool
		size   int64
		tool   string
	}{
		{name: "ext4", access: sanity.MountAccess, fsType: "ext4", size: 16 << 20, tool: "mkfs.ext4"},
		// mkfs.xfs makes nothing smaller than 300 MiB.
		{name: "xfs", access: sanity.MountAccess, params: map[string]string{driver.ParamFsType: "xfs"}, size: 320 << 20, tool: "mkfs.xfs"},
		{name: "block", access: sanity.BlockAccess, size: 16 << 20},
	} {
		t.Run(kind.name, func(t *testing.T) {
			if kind.tool != "" {
				if _, err := exec.LookPath(kind.tool); err != nil {
					cephtest.Skipf(t, "needs %s", kind.tool)
				}
			}
			state := t.TempDir()
			log := &sanity.LogBuffer{}
			logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
			target := sanity.Restartable(func() (any, csikit.Options, error) {
				d, err := driver.New(driver.Options{
					Monitors: c.Monitors, DefaultPool: c.Pool, NodeID: "sanity-node", StateDir: state,
					Mapper: driver.MapperFUSE, MaxCloneDepth: 1, Logger: logger,
				})
				if err != nil {
					return nil, csikit.Options{}, err
				}
				return d.Service(), d.ServerOptions(csikit.Options{
					Name: "rbd.csikit.dev", Version: "v0.0.0-sanity", NodeID: "sanity-node", Logger: logger,
				}), nil
			})
			skip := map[string]string{}
			if kind.name == "ext4" && !hasCapSysResource(t) {
				// ext4 online resize (EXT4_IOC_RESIZE_FS) needs
				// CAP_SYS_RESOURCE; without it resize2fs fails with
				// "Permission denied".
				why := "ext4 online resize needs CAP_SYS_RESOURCE, which this test process lacks"
				skip["mount/Expansion/NodeExpandVolume/after_publish"] = why
				skip["mount/DataPath/expansion_visible_on_node"] = why
			}
			params := map[string]string{driver.ParamPool: c.Pool}
			for k, v := range kind.params {
				params[k] = v
			}
			start := time.Now()
			sanity.Run(t, target, sanity.Config{
				Skip:       skip,
				AccessType: kind.access,
				VolumeSize: kind.size,
				ExpandSize: 2 * kind.size,
				FsType:     kind.fsType,
				Parameters: params,
				Secrets:    c.Secrets(),
				Log:        log.Bytes,
			})
			t.Logf("sanity against rbd (%s) took %v", kind.name, time.Since(start))
		})
	}
}

// hasCapSysResource reports whether the process has CAP_SYS_RESOURCE in
// its effective set (bit 24 of CapEff in /proc/self/status).
func hasCapSysResource(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return caps&(1<<24) != 0
		}
	}
	return false
}

//go:build linux

package main_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/internal/testenv"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/sanity"
)

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

// TestSanity runs the conformance harness against the hostpath driver in
// both access types, served in-process through csikit and restarted on its
// state directory for the Restart area.
func TestSanity(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "needs root: hostpath mounts filesystems and attaches loop devices")
	}
	for _, tool := range []string{"mkfs.ext4", "resize2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skipf(t, "needs %s (Debian package e2fsprogs)", tool)
		}
	}
	state := t.TempDir()
	log := &sanity.LogBuffer{}
	logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const nodeID = "sanity-node"
	target := sanity.Restartable(func() (any, csikit.Options, error) {
		d, err := driver.New(context.Background(), driver.Options{
			StateDir: state, NodeID: nodeID, Logger: logger,
			EnableAttach: true, EnableModify: true, MutableParameters: []string{"iops"},
		})
		if err != nil {
			return nil, csikit.Options{}, err
		}
		return d, csikit.Options{
			Name: "hostpath.csikit.dev", Version: "v0.0.0-sanity", NodeID: nodeID,
			Topology:    map[string]string{driver.TopologyKey: nodeID},
			VolumeModes: csikit.Mount | csikit.Block, AccessModes: driver.AccessModes(),
			SingleNodeMultiWriter: true, Alpha: true,
			Clone: true, ReadOnlyPublish: true, ListPublishedNodes: true,
			Journal: d.Journal(), Logger: logger,
		}, nil
	})
	skip := map[string]string{}
	if !hasCapSysResource(t) {
		// ext4 online resize (EXT4_IOC_RESIZE_FS) needs CAP_SYS_RESOURCE;
		// without it resize2fs fails with "Permission denied".
		why := "ext4 online resize needs CAP_SYS_RESOURCE, which this test process lacks"
		skip["mount/Expansion/NodeExpandVolume/after_publish"] = why
		skip["mount/DataPath/expansion_visible_on_node"] = why
	}
	start := time.Now()
	sanity.Run(t, target, sanity.Config{
		Skip:              skip,
		AccessType:        sanity.BothAccess,
		VolumeSize:        16 << 20, // small images keep snapshot and clone copies fast
		ExpandSize:        32 << 20,
		Parameters:        map[string]string{driver.ParamFSType: "ext4"},
		MutableParameters: map[string]string{"iops": "100"},
		Log:               log.Bytes,
	})
	t.Logf("sanity against hostpath (mount and block) took %v", time.Since(start))
}

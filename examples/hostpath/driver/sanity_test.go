//go:build linux

package driver_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/sanity"
)

// TestSanity runs the conformance harness against the hostpath driver in
// both access types, served in-process through csikit and restarted on its
// state directory for the Restart area.
func TestSanity(t *testing.T) {
	csitest.RequireRoot(t, "hostpath mounts filesystems and attaches loop devices")
	for _, tool := range []string{"mkfs.ext4", "resize2fs"} {
		csitest.RequireCommand(t, tool, "e2fsprogs")
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
	skip := resizeSkips(t)
	start := time.Now()
	sanity.Run(t, target, sanity.Config{
		Skip:              skip,
		AccessType:        sanity.BothAccess,
		VolumeSize:        16 << 20, // small images keep snapshot and clone copies fast
		ExpandSize:        32 << 20,
		Parameters:        map[string]string{driver.ParamFSType: "ext4"},
		MutableParameters: map[string]string{"iops": "100"},
		Log:               log.Bytes,
		BackendObjects:    driver.StateObjects(state),
	})
	t.Logf("sanity against hostpath (mount and block) took %v", time.Since(start))
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

// TestStateObjects checks the harness's view of hostpath's backend: a
// fresh state directory lists nothing, each volume and snapshot shows up
// under its ID while it exists, and after their deletion nothing is listed
// again (what stays is only what StateObjects leaves out).
func TestStateObjects(t *testing.T) {
	needRoot(t)
	csitest.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
	state := shortDir(t, "hp-objs-")
	s := serve(t, shortDir(t, "hp-sock-"), driver.Options{StateDir: state})
	list := driver.StateObjects(state)
	objects := func() []string {
		t.Helper()
		got, err := list(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := objects(); len(got) != 0 {
		t.Fatalf("got objects %q in a fresh state directory, want none", got)
	}
	dirVol := createVol(t, s, "objs-dir", 16<<20, capFor(false, ""), nil)
	volDir(t, s, state, dirVol) // a stage makes its directory
	blockVol := createVol(t, s, "objs-block", 16<<20, capFor(true, ""), nil)
	fsVol := createVol(t, s, "objs-ext4", 16<<20, capFor(false, "ext4"), nil)
	snap, err := s.ctl.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: "objs-snap", SourceVolumeId: fsVol})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(objects(), " ")
	t.Logf("objects while the volumes and the snapshot exist: %s", got)
	for _, id := range []string{dirVol, blockVol, fsVol, snap.GetSnapshot().GetSnapshotId()} {
		if !strings.Contains(got, "/"+id) {
			t.Errorf("got objects %q, want one naming %s", got, id)
		}
	}
	if _, err := s.ctl.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshot().GetSnapshotId()}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{dirVol, blockVol, fsVol} {
		if _, err := s.ctl.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if got := objects(); len(got) != 0 {
		t.Errorf("got objects %q after every volume and snapshot was deleted, want none", got)
	}
}

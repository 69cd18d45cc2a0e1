//go:build linux

package main_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/sanity"
)

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
		BackendObjects:    stateObjects(state),
	})
	t.Logf("sanity against hostpath (mount and block) took %v", time.Since(start))
}

// stateObjects is the sanity.Config.BackendObjects of a hostpath driver
// on state: every file and directory the driver keeps for volumes and
// snapshots ("volumes/<id>", "images/<id>.img", "images/<id>.staged",
// "snapshots/<id>[.img]", partial copies) and anything else below state,
// two levels deep (what is inside a volume is the volume's data). What
// legitimately stays is left out: the three directories themselves, the
// journal file that holds the name→ID journal and the volume, snapshot and
// group metadata (journal.db) and its compaction file while it is
// rewritten.
func stateObjects(state string) func(context.Context) ([]string, error) {
	keep := map[string]bool{"volumes": true, "images": true, "snapshots": true, "journal.db": true, "journal.db.compact": true}
	return func(context.Context) ([]string, error) {
		top, err := os.ReadDir(state)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, e := range top {
			if !keep[e.Name()] {
				out = append(out, e.Name())
			}
		}
		for _, dir := range []string{"volumes", "images", "snapshots"} {
			es, err := os.ReadDir(filepath.Join(state, dir))
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				out = append(out, dir+"/"+e.Name())
			}
		}
		return out, nil
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
				BackendObjects:    stateObjects(state),
			})
			t.Logf("sanity by endpoint against hostpath (%s volumes) took %v", k.name, time.Since(start))
		})
	}
}

// TestStateObjects checks the harness's view of hostpath's backend: a
// fresh state directory lists nothing, each volume and snapshot shows up
// under its ID while it exists, and after their deletion nothing is listed
// again (what stays is only what stateObjects leaves out).
func TestStateObjects(t *testing.T) {
	needRoot(t)
	testenv.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
	state := shortDir(t, "hp-objs-")
	s := serve(t, shortDir(t, "hp-sock-"), driver.Options{StateDir: state})
	list := stateObjects(state)
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

//go:build linux

package driver_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/hostpath/driver"
)

// served is one in-process run of the driver behind csikit's full chain on
// a unix socket (csitest), as main serves it.
type served struct {
	d    *driver.Driver
	srv  *csikit.Server
	conn *grpc.ClientConn
	ctl  csi.ControllerClient
	node csi.NodeClient
	stop func() // stops the server and closes the driver; idempotent
}

// needRoot skips (or fails under csitest.StrictEnv) without root.
func needRoot(tb testing.TB) {
	tb.Helper()
	csitest.RequireRoot(tb, "the driver mounts and attaches loop devices")
}

// shortDir is a temporary directory with a short path (unix socket paths
// are limited to 108 bytes), removed at the end of the test.
func shortDir(tb testing.TB, prefix string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serve opens the driver with opts and serves it with the options main
// gives csikit. sockDir is unused (csitest keeps its socket in a directory
// of its own) and kept for the callers' symmetry with a restart. stop runs
// at cleanup if the test did not call it.
func serve(tb testing.TB, sockDir string, opts driver.Options) *served {
	tb.Helper()
	_ = sockDir
	if opts.NodeID == "" {
		opts.NodeID = "test-node"
	}
	d, err := driver.New(context.Background(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	cs, err := csitest.Start(d, csikit.Options{
		Name: "hostpath.csikit.dev", Version: "test", NodeID: opts.NodeID, Disable: opts.Disabled(),
		VolumeModes: csikit.Mount | csikit.Block, AccessModes: driver.AccessModes(),
		Alpha: true, Clone: true, Journal: d.Journal(), LockKeys: d.LockKeys(),
	})
	if err != nil {
		d.Close()
		tb.Fatal(err)
	}
	s := &served{d: d, srv: cs.Server, conn: cs.Conn, ctl: cs.Controller, node: cs.Node}
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		if err := cs.Close(); err != nil {
			tb.Errorf("serving: %v", err)
		}
		d.Close()
	}
	tb.Cleanup(s.stop)
	return s
}

// capFor is a single-node-writer capability: block, or mount with fsType.
func capFor(block bool, fsType string, flags ...string) *csi.VolumeCapability {
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	if block {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: flags}}
	}
	return c
}

// createVol creates a volume and fails the test on error.
func createVol(tb testing.TB, s *served, name string, size int64, c *csi.VolumeCapability, src *csi.VolumeContentSource) string {
	tb.Helper()
	resp, err := s.ctl.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: name,
		CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapabilities: []*csi.VolumeCapability{c},
		VolumeContentSource: src})
	if err != nil {
		tb.Fatalf("CreateVolume %s: %v", name, err)
	}
	return resp.GetVolume().GetVolumeId()
}

// volDir materializes directory volume id (its directory is made at the
// first stage: see volume.Lazy) and returns its directory under state,
// for tests that write into it directly.
func volDir(tb testing.TB, s *served, state, id string) string {
	tb.Helper()
	if err := s.d.Materialize(context.Background(), id); err != nil {
		tb.Fatalf("materialize volume %s: %v", id, err)
	}
	return filepath.Join(state, "volumes", id)
}

//go:build linux

package main_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/internal/testenv"
)

// served is one in-process run of the driver behind csikit on a unix socket.
type served struct {
	d    *driver.Driver
	srv  *csikit.Server
	conn *grpc.ClientConn
	ctl  csi.ControllerClient
	node csi.NodeClient
	stop func() // stops the server and closes the driver; idempotent
}

// needRoot skips (or fails under CSIKIT_STRICT_TESTS) without root.
func needRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(tb, "needs root: the driver mounts and attaches loop devices")
	}
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

// serve opens the driver with opts and serves it on a socket in sockDir.
// stop runs at cleanup if the test did not call it.
func serve(tb testing.TB, sockDir string, opts driver.Options) *served {
	tb.Helper()
	if opts.NodeID == "" {
		opts.NodeID = "test-node"
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := driver.New(ctx, opts)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	srv, err := csikit.NewServer(d, csikit.Options{
		Name: "hostpath.csikit.dev", Version: "test", NodeID: opts.NodeID, Disable: opts.Disabled(),
		VolumeModes: csikit.Mount | csikit.Block, AccessModes: driver.AccessModes(),
		Alpha: true, Clone: true, Journal: d.Journal(), LockKeys: d.LockKeys(),
	})
	if err != nil {
		cancel()
		d.Close()
		tb.Fatal(err)
	}
	sock := filepath.Join(sockDir, "csi.sock")
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx, "unix://"+sock) }()
	for i := 0; i < 500; i++ {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		cancel()
		<-done
		d.Close()
		tb.Fatal(err)
	}
	s := &served{d: d, srv: srv, conn: conn, ctl: csi.NewControllerClient(conn), node: csi.NewNodeClient(conn)}
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		conn.Close()
		cancel()
		<-done
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

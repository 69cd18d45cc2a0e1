//go:build linux

package driver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
)

// TestPublishUnknownNode: with RequireNodeRegistration, a publish to a
// node ID no node plugin answered NodeGetInfo with is NOT_FOUND (the CSI
// spec's code for a node that does not exist); a node plugin with
// standing credentials registers at NodeGetInfo, and the publish to it
// succeeds; one without them registers nothing.
func TestPublishUnknownNode(t *testing.T) {
	c := cephtest.Require(t)
	ctx := context.Background()
	ctl := newDriver(t, c, driver.Options{RequireNodeRegistration: true})
	vol := blockVolume(t, ctl, c, nil)
	t.Cleanup(func() {
		if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol, Secrets: c.Secrets()}); err != nil {
			t.Errorf("DeleteVolume: %v", err)
		}
	})
	// Node IDs are opaque strings: slashes, quotes and a newline too.
	node := "node/\"x\"\n-" + journal.RandomID("")
	t.Cleanup(func() { unregister(t, c, node) })
	pub := func() error {
		_, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: vol, NodeId: node, VolumeCapability: blockCap, Secrets: c.Secrets()})
		return err
	}
	if err := pub(); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("publish to a node never registered = %v, want NotFound", err)
	}
	// A node plugin without standing credentials registers nothing.
	bare := newDriver(t, c, driver.Options{NodeID: node})
	if info, err := bare.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}); err != nil || info.GetNodeId() != node {
		t.Fatalf("NodeGetInfo without --secrets-dir = %v, %v", info, err)
	}
	if err := pub(); status.Code(err) != codes.NotFound {
		t.Fatalf("publish to a node whose plugin has no standing credentials = %v, want NotFound", err)
	}
	n := newDriver(t, c, driver.Options{NodeID: node, Zone: "z1", SecretsDir: secretsDir(t, c)})
	info, err := n.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatalf("NodeGetInfo: %v", err)
	}
	if info.GetNodeId() != node || info.GetAccessibleTopology().GetSegments()[driver.TopologyKey] != "z1" {
		t.Fatalf("NodeGetInfo = %v, want node %q in zone z1", info, node)
	}
	if err := pub(); err != nil {
		t.Fatalf("publish to a registered node: %v", err)
	}
	if err := pub(); err != nil {
		t.Fatalf("publish again (idempotent): %v", err)
	}
	if _, err := ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: node, Secrets: c.Secrets()}); err != nil {
		t.Fatal(err)
	}
	// A controller without the option publishes to any node ID.
	free := newDriver(t, c, driver.Options{})
	if _, err := free.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: vol, NodeId: "anywhere-" + journal.RandomID(""), VolumeCapability: blockCap, Secrets: c.Secrets()}); err != nil {
		t.Fatalf("publish to an unknown node without RequireNodeRegistration: %v", err)
	}
}

// unregister removes node's registration (driver.NodesObject).
func unregister(t *testing.T, c cephtest.Cluster, node string) {
	t.Helper()
	pool := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	defer pool.Close()
	io, done, err := pool.IOContext(context.Background(), driver.Credentials{User: c.User, Key: c.Key}, c.Pool, driver.AccessNamespace)
	if err != nil {
		t.Error(err)
		return
	}
	defer done()
	if err := io.RmOmapKeys(driver.NodesObject, []string{"node/" + node}); err != nil {
		t.Errorf("remove the registration of %q: %v", node, err)
	}
}

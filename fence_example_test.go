package csikit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/journal"
)

// hungAttacher is a toy controller whose nodes never let go of a volume by
// themselves (each hung), so every unpublish has to fence.
type hungAttacher struct {
	mu     sync.Mutex
	fenced map[string]bool
}

func (a *hungAttacher) LookupVolume(context.Context, string) error { return nil }

func (a *hungAttacher) ControllerPublishVolume(context.Context, *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	return &csi.ControllerPublishVolumeResponse{}, nil
}

func (a *hungAttacher) ControllerUnpublishVolume(context.Context, *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

// Holds: a node holds a volume until fenced off it.
func (a *hungAttacher) Holds(_ context.Context, vol, node string) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return !a.fenced[vol+"/"+node], nil
}

// Fence would blocklist the node's client on the backend.
func (a *hungAttacher) Fence(_ context.Context, vol, node string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fenced[vol+"/"+node] = true
	return nil
}

// Unfence lifts the blocklist.
func (a *hungAttacher) Unfence(_ context.Context, vol, node string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.fenced, vol+"/"+node)
	return nil
}

// A driver that implements csikit.Fencer is fenced by the server at
// ControllerUnpublishVolume; the fenced node is refused at publish until
// an admin lifts the fence with Server.Unfence.
func ExampleFencer() {
	dir, _ := os.MkdirTemp("", "csikit-example")
	defer os.RemoveAll(dir)
	j, err := journal.OpenFile(filepath.Join(dir, "journal.db"), journal.FileOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer j.Close()
	srv, err := csikit.NewServer(&hungAttacher{fenced: map[string]bool{}}, csikit.Options{
		Name: "block.vendor.example", Version: "v1.0.0", Journal: j,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	sock := filepath.Join(dir, "csi.sock")
	done := make(chan error)
	go func() { done <- srv.ListenAndServe(ctx, "unix://"+sock) }()
	defer func() { stop(); <-done }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	c := csi.NewControllerClient(conn)
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	publish := func(node string) error {
		_, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: node, VolumeCapability: capability}, grpc.WaitForReady(true))
		return err
	}

	_ = publish("node-a")
	_, err = c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "node-a"})
	fmt.Println("unpublish from node-a:", status.Code(err))
	fenced, _ := srv.FencedNodes(ctx)
	fmt.Printf("fenced: %s off %s\n", fenced[0].NodeID, fenced[0].VolumeID)
	fmt.Println("publish to node-a:", status.Code(publish("node-a")))
	fmt.Println("publish to node-b:", status.Code(publish("node-b")))

	// Node A restarted clean: the admin lifts the fence.
	_ = srv.Unfence(ctx, "vol-1", "node-a")
	fmt.Println("after Unfence, publish to node-a:", status.Code(publish("node-a")))
	// Output:
	// unpublish from node-a: OK
	// fenced: node-a off vol-1
	// publish to node-a: FailedPrecondition
	// publish to node-b: OK
	// after Unfence, publish to node-a: OK
}

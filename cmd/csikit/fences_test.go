//go:build linux

package main_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	csikitsdk "github.com/csikit/csikit"
	"github.com/csikit/csikit/journal"
)

// hungNodes is a controller whose nodes hold every volume until fenced.
type hungNodes struct {
	mu     sync.Mutex
	fenced map[string]bool
}

func (*hungNodes) LookupVolume(context.Context, string) error { return nil }

func (*hungNodes) ControllerPublishVolume(context.Context, *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	return &csi.ControllerPublishVolumeResponse{}, nil
}

func (*hungNodes) ControllerUnpublishVolume(context.Context, *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (h *hungNodes) Holds(_ context.Context, vol, node string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.fenced[vol+"/"+node], nil
}

func (h *hungNodes) Fence(_ context.Context, vol, node string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fenced[vol+"/"+node] = true
	return nil
}

func (h *hungNodes) Unfence(_ context.Context, vol, node string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.fenced, vol+"/"+node)
	return nil
}

// fencingDriver serves hungNodes in this process and returns its
// endpoint and a controller client.
func fencingDriver(t *testing.T) (string, csi.ControllerClient) {
	t.Helper()
	srv, err := csikitsdk.NewServer(&hungNodes{fenced: map[string]bool{}}, csikitsdk.Options{Name: "fence.cli.csikit.dev", Version: "v1", Journal: journal.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "cf")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "csi.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); cancel(); <-done; os.RemoveAll(dir) })
	return "unix://" + sock, csi.NewControllerClient(conn)
}

func TestFencesAndUnfence(t *testing.T) {
	ep, c := fencingDriver(t)
	ctx := context.Background()
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	if _, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "worker-3", VolumeCapability: capability}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: "vol-1", NodeId: "worker-3"}); err != nil {
		t.Fatal(err)
	}
	r := csikit(t, "fences", ep).want(t, 0)
	if !strings.Contains(r.stdout, "VOLUME") || !strings.Contains(r.stdout, "vol-1") || !strings.Contains(r.stdout, "worker-3") || !strings.Contains(r.stdout, "done") {
		t.Fatalf("fences printed:\n%s", r.stdout)
	}
	obj := csikit(t, "fences", ep, "--json").want(t, 0).object(t)
	if obj["complete"] != true || len(obj["fenced"].([]any)) != 1 {
		t.Fatalf("fences --json: %v", obj)
	}
	csikit(t, "unfence", ep, "vol-1").want(t, 2)
	r = csikit(t, "unfence", ep, "vol-1", "worker-3").want(t, 0)
	if !strings.Contains(r.stdout, "lifted") {
		t.Fatalf("unfence printed %q", r.stdout)
	}
	if _, err := c.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "vol-1", NodeId: "worker-3", VolumeCapability: capability}); err != nil {
		t.Fatalf("publish after csikit unfence: %v", err)
	}
	if r := csikit(t, "fences", ep).want(t, 0); strings.Contains(r.stdout, "vol-1") {
		t.Fatalf("fences after unfence:\n%s", r.stdout)
	}

	// Every fence of one node at once; another node's stays.
	for _, p := range [][2]string{{"vol-2", "worker-4"}, {"vol-3", "worker-4"}, {"vol-4", "worker-5"}} {
		if _, err := c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: p[0], NodeId: p[1]}); err != nil {
			t.Fatal(err)
		}
	}
	r = csikit(t, "unfence", "--node", "worker-4", ep).want(t, 0)
	if strings.Count(r.stdout, "lifted") != 2 {
		t.Fatalf("unfence --node printed:\n%s", r.stdout)
	}
	r = csikit(t, "fences", ep).want(t, 0)
	if strings.Contains(r.stdout, "worker-4") || !strings.Contains(r.stdout, "worker-5") {
		t.Fatalf("fences after unfence --node worker-4:\n%s", r.stdout)
	}
	csikit(t, "unfence", "--node", "worker-4", ep, "vol-2").want(t, 2)
}

// A driver without a Fencer answers Unimplemented.
func TestFencesOfADriverThatDoesNotFence(t *testing.T) {
	p := tmpfs(t)
	r := csikit(t, "fences", p.Endpoint).want(t, 1)
	if !strings.Contains(r.stderr, "Unimplemented") {
		t.Fatalf("stderr %q, want Unimplemented", r.stderr)
	}
}

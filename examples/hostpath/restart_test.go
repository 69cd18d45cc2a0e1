//go:build linux

package main_test

import (
	"context"
	"fmt"
	"github.com/csikit/csikit/internal/testenv"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/block"
)

// buildHostpath builds the driver binary once per test.
func buildHostpath(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hostpath")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// proc is one run of the driver binary.
type proc struct {
	cmd  *exec.Cmd
	conn *grpc.ClientConn
}

func startHostpath(t *testing.T, bin, dir string) *proc {
	t.Helper()
	sock := filepath.Join(dir, "csi.sock")
	cmd := exec.Command(bin, "--endpoint", "unix://"+sock, "--nodeid", "restart-node",
		"--state-dir", filepath.Join(dir, "state"), "--log-level", "error")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("driver socket never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &proc{cmd: cmd, conn: conn}
}

func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	p.conn.Close()
}

func createReq(name string, block bool) *csi.CreateVolumeRequest {
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	if block {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}
	}
	return &csi.CreateVolumeRequest{Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 20}, VolumeCapabilities: []*csi.VolumeCapability{c}}
}

// createUntilDone retries CreateVolume the way a CO does: after Aborted
// and transport errors, until it succeeds.
func createUntilDone(ctx context.Context, c csi.ControllerClient, req *csi.CreateVolumeRequest) (string, error) {
	for {
		resp, err := c.CreateVolume(ctx, req)
		if err == nil {
			return resp.GetVolume().GetVolumeId(), nil
		}
		switch status.Code(err) {
		case codes.Aborted, codes.Unavailable, codes.DeadlineExceeded:
		default:
			return "", err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestKillDashNineMidCreate SIGKILLs the driver while 8 clients create
// volumes, restarts it on the same state directory, retries every create,
// and checks that each name maps to exactly one volume, that no data is
// orphaned, and that a block volume staged before the kill can still be
// published after it (its loop device is re-attached or reused).
func TestKillDashNineMidCreate(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "needs root: the driver attaches loop devices and mounts filesystems")
	}
	if testing.Short() {
		t.Skip("builds and restarts the driver binary; skipped with -short")
	}
	bin := buildHostpath(t)
	dir, err := os.MkdirTemp("", "hpk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	p := startHostpath(t, bin, dir)
	ctrl, node := csi.NewControllerClient(p.conn), csi.NewNodeClient(p.conn)

	// A block volume staged before the kill.
	blockID, err := createUntilDone(ctx, ctrl, createReq("staged-block", true))
	if err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(dir, "staging")
	target := filepath.Join(dir, "target")
	blockCap := createReq("x", true).VolumeCapabilities[0]
	if _, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: blockID, StagingTargetPath: staging, VolumeCapability: blockCap}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("umount", target).Run()
		img := filepath.Join(dir, "state", "images", blockID+".img")
		if dev, ok, _ := block.FindLoop(context.Background(), img); ok {
			block.DetachLoop(context.Background(), dev)
		}
	})

	const rounds, clients, perClient = 3, 8, 6
	names := map[string]bool{}
	for round := 0; round < rounds; round++ {
		var wg sync.WaitGroup
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				for i := 0; i < perClient; i++ {
					// Errors are expected: the driver dies under us.
					ctrl.CreateVolume(ctx, createReq(fmt.Sprintf("r%d-c%d-v%d", round, c, i), (c+i)%3 == 0))
				}
			}(c)
			for i := 0; i < perClient; i++ {
				names[fmt.Sprintf("r%d-c%d-v%d", round, c, i)] = (c+i)%3 == 0
			}
		}
		time.Sleep(time.Duration(20+30*round) * time.Millisecond)
		p.kill()
		wg.Wait()
		p = startHostpath(t, bin, dir)
		ctrl, node = csi.NewControllerClient(p.conn), csi.NewNodeClient(p.conn)
	}

	// Every create, retried, lands on exactly one volume per name.
	ids := map[string]string{}
	for name, block := range names {
		id, err := createUntilDone(ctx, ctrl, createReq(name, block))
		if err != nil {
			t.Fatalf("retry of %s after restarts: %v", name, err)
		}
		again, err := createUntilDone(ctx, ctrl, createReq(name, block))
		if err != nil || again != id {
			t.Fatalf("second retry of %s: got %q, %v; want %q", name, again, err, id)
		}
		ids[id] = name
	}
	if len(ids) != len(names) {
		t.Fatalf("got %d distinct volume IDs for %d names", len(ids), len(names))
	}
	list, err := ctrl.ListVolumes(ctx, &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(list.GetEntries()), len(names)+1; got != want {
		t.Errorf("ListVolumes: got %d volumes, want %d (no duplicates, none lost)", got, want)
	}
	// No orphaned data: every directory or image belongs to a listed volume.
	listed := map[string]bool{}
	for _, e := range list.GetEntries() {
		listed[e.GetVolume().GetVolumeId()] = true
	}
	for _, sub := range []string{"volumes", "images"} {
		entries, _ := os.ReadDir(filepath.Join(dir, "state", sub))
		for _, e := range entries {
			id := e.Name()
			if ext := filepath.Ext(id); ext == ".img" || ext == ".staged" {
				id = id[:len(id)-len(ext)]
			}
			if !listed[id] {
				t.Errorf("orphaned %s/%s: no volume owns it", sub, e.Name())
			}
		}
	}

	// The block volume staged before the kills still publishes.
	if _, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: blockID, StagingTargetPath: staging, TargetPath: target, VolumeCapability: blockCap}); err != nil {
		t.Fatalf("publish of a block volume staged before the restarts: %v", err)
	}
	if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: blockID, TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: blockID, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	for id := range listed {
		if _, err := ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Errorf("DeleteVolume(%s): %v", id, err)
		}
	}
}

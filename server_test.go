package csikit_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/internal/testenv"
)

// ctrlDriver is a controller-only driver: create/delete, snapshots,
// expansion, get volume.
type ctrlDriver struct {
	creates atomic.Int32
	create  func(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error)
}

func (d *ctrlDriver) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	d.creates.Add(1)
	if d.create != nil {
		return d.create(ctx, r)
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-" + r.GetName(), CapacityBytes: r.GetCapacityRange().GetRequiredBytes()}}, nil
}

func (d *ctrlDriver) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *ctrlDriver) CreateSnapshot(_ context.Context, r *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	return &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{SnapshotId: "snap-" + r.GetName(), SourceVolumeId: r.GetSourceVolumeId(), ReadyToUse: true}}, nil
}

func (d *ctrlDriver) DeleteSnapshot(context.Context, *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	return &csi.DeleteSnapshotResponse{}, nil
}

func (d *ctrlDriver) ControllerExpandVolume(_ context.Context, r *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: r.GetCapacityRange().GetRequiredBytes()}, nil
}

func (d *ctrlDriver) ControllerGetVolume(_ context.Context, r *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	if !strings.HasPrefix(r.GetVolumeId(), "vol-") {
		return nil, status.Error(codes.NotFound, "no such volume")
	}
	return &csi.ControllerGetVolumeResponse{Volume: &csi.Volume{VolumeId: r.GetVolumeId()}}, nil
}

// nodeDriver is a node-only driver: stage, publish, stats.
type nodeDriver struct {
	publishes atomic.Int32
	publish   func(ctx context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error)
}

func (d *nodeDriver) NodeStageVolume(context.Context, *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	return &csi.NodeStageVolumeResponse{}, nil
}

func (d *nodeDriver) NodeUnstageVolume(context.Context, *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (d *nodeDriver) NodePublishVolume(ctx context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	d.publishes.Add(1)
	if d.publish != nil {
		return d.publish(ctx, r)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *nodeDriver) NodeUnpublishVolume(context.Context, *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (d *nodeDriver) NodeGetVolumeStats(context.Context, *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	return &csi.NodeGetVolumeStatsResponse{}, nil
}

// fullDriver is both.
type fullDriver struct {
	ctrlDriver
	nodeDriver
}

// shortTempDir returns a directory whose paths fit a unix socket name.
func shortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

type served struct {
	srv    *csikit.Server
	conn   *grpc.ClientConn
	sock   string
	cancel context.CancelFunc
	done   chan error
}

func (s *served) identity() csi.IdentityClient     { return csi.NewIdentityClient(s.conn) }
func (s *served) controller() csi.ControllerClient { return csi.NewControllerClient(s.conn) }
func (s *served) node() csi.NodeClient             { return csi.NewNodeClient(s.conn) }

// serve runs driver through csikit on a real unix socket until the test
// ends.
func serve(t testing.TB, driver any, opts csikit.Options) *served {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "test.csikit.dev"
	}
	if opts.Version == "" {
		opts.Version = "v0.0.1"
	}
	srv, err := csikit.NewServer(driver, opts)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	sock := filepath.Join(shortTempDir(t), "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx, "unix://"+sock) }()
	waitForSocket(t, sock)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s := &served{srv: srv, conn: conn, sock: sock, cancel: cancel, done: done}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ListenAndServe: %v", err)
		}
	})
	return s
}

func waitForSocket(t testing.TB, sock string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("socket %s never became ready", sock)
}

func TestNewServerRejectsBadOptions(t *testing.T) {
	long := strings.Repeat("a", 64)
	cases := []struct {
		name   string
		driver any
		opts   csikit.Options
		want   string
	}{
		{"nil driver", nil, csikit.Options{Name: "a.b", Version: "1"}, "nil"},
		{"empty name", &ctrlDriver{}, csikit.Options{Version: "1"}, "plugin name"},
		{"name too long", &ctrlDriver{}, csikit.Options{Name: long, Version: "1"}, "plugin name"},
		{"name with underscore", &ctrlDriver{}, csikit.Options{Name: "a_b.example", Version: "1"}, "plugin name"},
		{"name ends with dot", &ctrlDriver{}, csikit.Options{Name: "a.example.", Version: "1"}, "plugin name"},
		{"empty version", &ctrlDriver{}, csikit.Options{Name: "a.example"}, "Version"},
		{"implements nothing", struct{}{}, csikit.Options{Name: "a.example", Version: "1"}, "implements no CSI service"},
		{"node without node id", &nodeDriver{}, csikit.Options{Name: "a.example", Version: "1"}, "NodeID"},
		{"bad topology key", &nodeDriver{}, csikit.Options{Name: "a.example", Version: "1", NodeID: "n", Topology: map[string]string{"bad key!": "x"}}, "Topology"},
		// Capabilities of RPCs the controller does not serve were dropped
		// without a word; a vendor expecting readonly publishes from
		// ReadOnlyPublish found out only from a failing test.
		{"readonly publish without ControllerPublish", &ctrlDriver{}, csikit.Options{Name: "a.example", Version: "1", ReadOnlyPublish: true}, "ReadOnlyPublish"},
		{"published nodes without ListVolumes", &ctrlDriver{}, csikit.Options{Name: "a.example", Version: "1", ListPublishedNodes: true}, "ListPublishedNodes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := csikit.NewServer(c.driver, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v, want one mentioning %q", err, c.want)
			}
		})
	}
	if _, err := csikit.NewServer(&ctrlDriver{}, csikit.Options{Name: strings.Repeat("a", 63), Version: "1"}); err != nil {
		t.Fatalf("63-character name: got %v, want nil", err)
	}
	// A node plugin sharing a controller's Options is not refused.
	if _, err := csikit.NewServer(&nodeDriver{}, csikit.Options{Name: "a.example", Version: "1", NodeID: "n", ReadOnlyPublish: true, ListPublishedNodes: true}); err != nil {
		t.Fatalf("node plugin with controller-only options: got %v, want nil", err)
	}
}

func TestGracefulShutdownDrainsInFlightCalls(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	d := &ctrlDriver{create: func(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
		close(started)
		<-release
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-1"}}, nil
	}}
	s := serve(t, d, csikit.Options{DrainTimeout: 10 * time.Second})
	var (
		wg   sync.WaitGroup
		cerr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, cerr = s.controller().CreateVolume(context.Background(), newCreate("drain"))
	}()
	<-started
	s.cancel() // begin shutdown while the call is in flight
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-s.done:
		t.Fatalf("server exited (%v) before the in-flight call finished", err)
	default:
	}
	close(release)
	wg.Wait()
	if cerr != nil {
		t.Fatalf("in-flight call: got %v, want success after drain", cerr)
	}
	if err := <-s.done; err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
	s.done <- nil // for the cleanup's receive
	if _, err := os.Stat(s.sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket file after shutdown: got %v, want it removed", err)
	}
}

func TestDrainTimeoutCancelsStuckCalls(t *testing.T) {
	started := make(chan struct{})
	d := &ctrlDriver{create: func(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
		close(started)
		<-ctx.Done() // a hung backend that at least honours ctx
		return nil, ctx.Err()
	}}
	s := serve(t, d, csikit.Options{DrainTimeout: 100 * time.Millisecond})
	errc := make(chan error, 1)
	go func() {
		_, err := s.controller().CreateVolume(context.Background(), newCreate("stuck"))
		errc <- err
	}()
	<-started
	s.cancel()
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("ListenAndServe: %v", err)
		}
		s.done <- nil
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop after its drain timeout")
	}
	if err := <-errc; err == nil {
		t.Fatal("stuck call: got success, want an error after the drain timeout")
	}
}

func TestLiveSocketIsNotStolen(t *testing.T) {
	s := serve(t, &ctrlDriver{}, csikit.Options{})
	srv2, err := csikit.NewServer(&ctrlDriver{}, csikit.Options{Name: "other.example", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	err = srv2.ListenAndServe(context.Background(), "unix://"+s.sock)
	if err == nil {
		t.Fatal("second server on a live socket: got nil, want an error")
	}
	// The first server still answers.
	if _, err := s.identity().Probe(context.Background(), &csi.ProbeRequest{}); err != nil {
		t.Fatalf("Probe on the first server after the second failed: %v", err)
	}
}

func TestStaleSocketIsReplaced(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "csi.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close() // leaves the socket file behind, like a crashed driver
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
	srv, err := csikit.NewServer(&ctrlDriver{}, csikit.Options{Name: "a.example", Version: "1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx, sock) }()
	waitForSocket(t, sock)
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o660 {
		t.Errorf("socket mode: got %v, want 0660", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
}

func newCreate(name string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 1 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
	}
}

func mountCap(m csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: m},
	}
}

func blockCap(m csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: m},
	}
}

func debugLogger(w *testenv.SyncBuffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
}

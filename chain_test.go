package csikit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/internal/testenv"
)

func TestValidationRunsBeforeTheDriver(t *testing.T) {
	d := &fullDriver{}
	s := serve(t, d, csikit.Options{NodeID: "n1"})
	ctx := context.Background()
	cases := []struct {
		name string
		call func() error
		want codes.Code
	}{
		{"CreateVolume without name", func() error {
			r := newCreate("")
			_, err := s.controller().CreateVolume(ctx, r)
			return err
		}, codes.InvalidArgument},
		{"CreateVolume without capabilities", func() error {
			r := newCreate("a")
			r.VolumeCapabilities = nil
			_, err := s.controller().CreateVolume(ctx, r)
			return err
		}, codes.InvalidArgument},
		{"CreateVolume with block on a mount-only driver", func() error {
			r := newCreate("a")
			r.VolumeCapabilities = []*csi.VolumeCapability{blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}
			_, err := s.controller().CreateVolume(ctx, r)
			return err
		}, codes.InvalidArgument},
		{"CreateVolume with a multi-node mode not offered", func() error {
			r := newCreate("a")
			r.VolumeCapabilities = []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}
			_, err := s.controller().CreateVolume(ctx, r)
			return err
		}, codes.InvalidArgument},
		{"CreateVolume from a volume without Clone", func() error {
			r := newCreate("a")
			r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "v"}}}
			_, err := s.controller().CreateVolume(ctx, r)
			return err
		}, codes.InvalidArgument},
		{"NodePublishVolume without target path", func() error {
			_, err := s.node().NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)})
			return err
		}, codes.InvalidArgument},
		{"ControllerExpandVolume without capacity", func() error {
			_, err := s.controller().ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "v"})
			return err
		}, codes.InvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { testenv.WantCode(t, c.call(), c.want) })
	}
	if n := d.creates.Load(); n != 0 {
		t.Errorf("driver CreateVolume calls: got %d, want 0 (validation must answer first)", n)
	}
	if n := d.publishes.Load(); n != 0 {
		t.Errorf("driver NodePublishVolume calls: got %d, want 0", n)
	}
	// A long kubelet target path is a path, not an ID: no 128-byte cap.
	long := "/var/lib/kubelet/pods/" + strings.Repeat("0123456789abcdef", 12) + "/volumes/kubernetes.io~csi/pvc-x/mount"
	_, err := s.node().NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: "v", StagingTargetPath: "/s", TargetPath: long, VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
	})
	if err != nil {
		t.Fatalf("NodePublishVolume with a %d-byte target path: %v", len(long), err)
	}
}

func TestPanicBecomesInternalAndServerKeepsServing(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	d := &ctrlDriver{create: func(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
		if r.GetName() == "boom" {
			panic("driver bug")
		}
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-" + r.GetName()}}, nil
	}}
	s := serve(t, d, csikit.Options{Logger: debugLogger(logs)})
	_, err := s.controller().CreateVolume(context.Background(), newCreate("boom"))
	testenv.WantCode(t, err, codes.Internal)
	if strings.Contains(err.Error(), "driver bug") {
		t.Errorf("panic value leaked to the client: %v", err)
	}
	if _, err := s.controller().CreateVolume(context.Background(), newCreate("after")); err != nil {
		t.Fatalf("call after a panic: %v", err)
	}
	// The same name (now free again) can be retried: the panic released its lock.
	_, err = s.controller().CreateVolume(context.Background(), newCreate("boom"))
	testenv.WantCode(t, err, codes.Internal)
	out := logs.String()
	if n := strings.Count(out, `"msg":"panic recovered"`); n != 2 {
		t.Errorf("panics logged: got %d, want one per panic (2):\n%s", n, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "panic recovered") && !strings.Contains(line, `"request_id"`) {
			t.Errorf("panic line without a request ID: %s", line)
		}
	}
	if n := strings.Count(out, `"code":"Internal"`); n != 2 {
		t.Errorf("call lines with code Internal: got %d, want 2 (the call is logged like any error):\n%s", n, out)
	}
}

func TestSecretsNeverLogged(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	const secret = "s3cr3t-value-Zq9"
	d := &fullDriver{}
	d.ctrlDriver.create = func(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
		return nil, statusErr(codes.ResourceExhausted, "backend full")
	}
	s := serve(t, d, csikit.Options{NodeID: "n1", Logger: debugLogger(logs)})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-request-id", "req-abc-123")
	r := newCreate("with-secrets")
	r.Secrets = map[string]string{"password": secret}
	r.Parameters = map[string]string{"pool": "fast"}
	_, err := s.controller().CreateVolume(ctx, r)
	testenv.WantCode(t, err, codes.ResourceExhausted)
	_, err = s.node().NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: "v", StagingTargetPath: "/s", VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
		Secrets: map[string]string{"key": secret},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Invalid requests are logged too, and still without secrets.
	bad := newCreate("")
	bad.Secrets = map[string]string{"password": secret}
	_, err = s.controller().CreateVolume(ctx, bad)
	testenv.WantCode(t, err, codes.InvalidArgument)
	if strings.Contains(err.Error(), secret) {
		t.Errorf("secret in an error message: %v", err)
	}

	out := logs.String()
	if strings.Contains(out, secret) {
		t.Fatalf("secret value found in the debug log:\n%s", out)
	}
	for _, want := range []string{"req-abc-123", "CreateVolume", "NodeStageVolume", "with-secrets", "ResourceExhausted"} {
		if !strings.Contains(out, want) {
			t.Errorf("debug log lacks %q:\n%s", want, out)
		}
	}
}

func TestSameVolumeConcurrentCallsAbort(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	d := &fullDriver{}
	d.nodeDriver.publish = func(ctx context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
		if r.GetVolumeId() == "hot" {
			close(started)
			<-release
		}
		return &csi.NodePublishVolumeResponse{}, nil
	}
	s := serve(t, d, csikit.Options{NodeID: "n1"})
	req := func(id string) *csi.NodePublishVolumeRequest {
		return &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: "/s", TargetPath: "/t/" + id,
			VolumeCapability: mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}
	}
	errc := make(chan error, 1)
	go func() {
		_, err := s.node().NodePublishVolume(context.Background(), req("hot"))
		errc <- err
	}()
	<-started
	_, err := s.node().NodePublishVolume(context.Background(), req("hot"))
	testenv.WantCode(t, err, codes.Aborted)
	if !strings.Contains(err.Error(), "NodePublishVolume") {
		t.Errorf("Aborted message should name the holder RPC: %v", err)
	}
	// Another volume is not blocked.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.node().NodePublishVolume(ctx, req("cold")); err != nil {
		t.Fatalf("unrelated volume: %v", err)
	}
	if held, _ := s.srv.LockStats(); held < 1 {
		t.Errorf("LockStats while a call holds a lock: got %d held, want ≥ 1", held)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

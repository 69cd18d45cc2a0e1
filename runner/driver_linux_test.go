package runner_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/k8s/registration"
	"github.com/csikit/csikit/runner"
)

// probeDriver is a driver whose Probe answers what ready says.
type probeDriver struct{ ready atomic.Bool }

func (d *probeDriver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(d.ready.Load())}, nil
}

func (d *probeDriver) NodePublishVolume(context.Context, *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	return nil, status.Error(codes.Unimplemented, "not in this test")
}

func (d *probeDriver) NodeUnpublishVolume(context.Context, *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	return nil, status.Error(codes.Unimplemented, "not in this test")
}

// sickJournal is a memory journal that reports a health of its own.
type sickJournal struct {
	journal.Journal
	err atomic.Pointer[error]
}

func (j *sickJournal) Err() error {
	if e := j.err.Load(); e != nil {
		return *e
	}
	return nil
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDriverStandardParts runs NewDriver's group as a driver's main does:
// /readyz?verbose names every part and check; the driver's Probe, the
// journal and kubelet's report each flip /healthz and /readyz to 503 naming
// them; /metrics counts the CSI calls; SIGTERM stops it cleanly with the
// CSI and registration sockets removed.
func TestDriverStandardParts(t *testing.T) {
	dir, err := os.MkdirTemp("", "runner") // short: unix socket paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "csi.sock")
	drv := &probeDriver{}
	drv.ready.Store(true)
	j := &sickJournal{Journal: journal.NewMemory()}
	reg := prometheus.NewRegistry()
	srv, err := csikit.NewServer(drv, csikit.Options{Name: "runner.csikit.dev", Version: "v1", NodeID: "node-1", Journal: j, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	swept := make(chan struct{}, 1)
	d, err := runner.NewDriver(runner.DriverOptions{
		Server: srv, Endpoint: "unix://" + sock, HTTPListener: ln, Metrics: reg,
		Registration: &registration.Options{DriverName: "runner.csikit.dev", Endpoint: sock, Dir: dir},
		Sweep: func(context.Context) error {
			select {
			case swept <- struct{}{}:
			default:
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	returned := false
	t.Cleanup(func() {
		if !returned {
			cancel()
			<-done
		}
	})
	waitFor(t, "/readyz 200", func() bool { code, _ := get(t, url+"/readyz"); return code == 200 })
	<-swept
	code, body := get(t, url+"/readyz?verbose")
	want := "[+]running ok\n[+]http ok\n[+]kubelet-registration ok\n[+]csi ok\n[+]sweep ok\n[+]probe ok\n[+]journal ok\nreadyz check passed\n"
	if code != 200 || body != want {
		t.Errorf("/readyz?verbose: %d %q, want 200 %q", code, body, want)
	}

	// The driver's Probe says not ready.
	drv.ready.Store(false)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, url+path); code != 503 || !strings.Contains(body, "[-]probe failed: plugin is not ready yet\n") {
			t.Errorf("%s with Probe not ready: %d %q, want 503 naming probe", path, code, body)
		}
	}
	drv.ready.Store(true)

	// The journal stops taking writes: its own check and Probe fail.
	e := status.Error(codes.Internal, "fdatasync: input/output error")
	j.err.Store(&e)
	if code, body := get(t, url+"/healthz"); code != 503 || !strings.Contains(body, "[-]journal failed: FailedPrecondition") ||
		!strings.Contains(body, "input/output error") {
		t.Errorf("/healthz with a failing journal: %d %q, want 503 naming journal", code, body)
	}
	j.err.Store(nil)

	// kubelet's side of the registration, and its report of a failure.
	regSock := filepath.Join(dir, "runner.csikit.dev-reg.sock")
	conn, err := grpc.NewClient("unix://"+regSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	kubelet := registerapi.NewRegistrationClient(conn)
	if info, err := kubelet.GetInfo(ctx, &registerapi.InfoRequest{}); err != nil || info.GetEndpoint() != sock {
		t.Fatalf("GetInfo = %v, %v; want endpoint %s", info, err, sock)
	}
	if _, err := kubelet.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{Error: "version not supported"}); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, url+"/healthz"); code != 503 || !strings.Contains(body, "[-]kubelet-registration failed: ") || !strings.Contains(body, "version not supported") {
		t.Errorf("/healthz after a failed registration: %d %q, want 503 naming kubelet-registration", code, body)
	}

	// A CSI call shows in /metrics.
	cc, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := csi.NewIdentityClient(cc).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, url+"/metrics"); !strings.Contains(body, `method_name="/csi.v1.Identity/GetPluginInfo"`) {
		t.Error("/metrics does not count the GetPluginInfo call")
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		returned = true
		if err != nil {
			t.Errorf("Run after SIGTERM: %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of SIGTERM")
	}
	for _, s := range []string{sock, regSock} {
		if _, err := os.Lstat(s); !os.IsNotExist(err) {
			t.Errorf("%s left behind after SIGTERM (%v)", s, err)
		}
	}
}

// TestDriverProbeHonoursDisable: with the Prober switched off, the probe
// check asks the server's Probe, which no longer asks the driver.
func TestDriverProbeHonoursDisable(t *testing.T) {
	drv := &probeDriver{} // never ready
	srv, err := csikit.NewServer(drv, csikit.Options{Name: "runner.csikit.dev", Version: "v1", NodeID: "node-1",
		Disable: []reflect.Type{reflect.TypeFor[csikit.Prober]()}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d, err := runner.NewDriver(runner.DriverOptions{Server: srv, Endpoint: filepath.Join(dir, "csi.sock")})
	if err != nil {
		t.Fatal(err)
	}
	running(t, d.Group)
	if err := d.Ready(context.Background()); err != nil {
		t.Errorf("Ready with Prober disabled: %v, want nil", err)
	}
}

func TestNewDriverRequires(t *testing.T) {
	if _, err := runner.NewDriver(runner.DriverOptions{Endpoint: "/x"}); err == nil || !strings.Contains(err.Error(), "Server") {
		t.Errorf("without Server: %v", err)
	}
	srv, err := csikit.NewServer(&probeDriver{}, csikit.Options{Name: "runner.csikit.dev", Version: "v1", NodeID: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runner.NewDriver(runner.DriverOptions{Server: srv}); err == nil || !strings.Contains(err.Error(), "Endpoint") {
		t.Errorf("without Endpoint: %v", err)
	}
	if _, err := runner.NewDriver(runner.DriverOptions{Server: srv, Endpoint: "/x",
		Registration: &registration.Options{DriverName: "runner.csikit.dev", Endpoint: "relative"}}); err == nil {
		t.Error("with a relative registration endpoint: no error")
	}
}

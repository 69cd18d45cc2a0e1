package registration_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/csikit/csikit/k8s/registration"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const driverName = "block.csikit.example"

// shortDir returns a fresh directory with a short path (unix socket paths
// are limited to 107 bytes), removed at the end of the test.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "reg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// nodeServer is a minimal CSI node plugin: the endpoint kubelet is sent to.
type nodeServer struct {
	csi.UnimplementedNodeServer
	nodeID string
}

func (n *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: n.nodeID}, nil
}

// serveCSI runs a real gRPC CSI node server on a unix socket at path.
func serveCSI(t *testing.T, path, nodeID string) {
	t.Helper()
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csi.RegisterNodeServer(srv, &nodeServer{nodeID: nodeID})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); wg.Wait() })
}

// dialLikeKubelet connects to a unix socket path the way kubelet's plugin
// watcher and CSI client do: a bare path, passthrough resolver, unix dialer.
func dialLikeKubelet(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// startRegistrar listens synchronously and serves in the background; the
// returned stop cancels and waits for Serve to return.
func startRegistrar(t *testing.T, r *registration.Registrar) (stop func() error) {
	t.Helper()
	if err := r.Listen(); err != nil {
		t.Fatalf("Listen: got %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Serve(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-errc })
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// highestV1 applies kubelet's rule for CSI versions: some version parses as
// major.minor[.patch] with major 1.
func highestV1(versions []string) bool {
	for _, v := range versions {
		major, _, ok := strings.Cut(v, ".")
		if n, err := strconv.Atoi(major); ok && err == nil && n == 1 {
			return true
		}
	}
	return false
}

// TestKubeletRegistersPlugin plays kubelet's plugin watcher and CSI handler
// end to end over real unix sockets.
func TestKubeletRegistersPlugin(t *testing.T) {
	regDir, pluginDir := shortDir(t), shortDir(t)
	csiSock := filepath.Join(pluginDir, "csi.sock")
	serveCSI(t, csiSock, "worker-7")

	var logs bytes.Buffer
	var logMu sync.Mutex
	r, err := registration.New(registration.Options{
		DriverName: driverName,
		Endpoint:   "unix://" + csiSock,
		Dir:        regDir,
		Logger:     slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	wantSock := filepath.Join(regDir, driverName+"-reg.sock")
	if r.SocketPath() != wantSock {
		t.Errorf("SocketPath: got %q, want %q", r.SocketPath(), wantSock)
	}
	stop := startRegistrar(t, r)

	// Kubelet finds the socket in plugins_registry...
	fi, err := os.Lstat(wantSock)
	if err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("registration socket: got %v, %v, want a socket", fi, err)
	}
	if perm := fi.Mode().Perm(); perm != registration.DefaultSocketMode {
		t.Errorf("socket mode: got %v, want %v", perm, registration.DefaultSocketMode)
	}
	// ...dials it and asks for the plugin info.
	reg := registerapi.NewRegistrationClient(dialLikeKubelet(t, wantSock))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := reg.GetInfo(ctx, &registerapi.InfoRequest{})
	if err != nil {
		t.Fatalf("GetInfo: got %v, want nil", err)
	}
	if info.GetType() != registerapi.CSIPlugin || info.GetName() != driverName {
		t.Errorf("GetInfo: got type %q name %q, want %q %q", info.GetType(), info.GetName(), registerapi.CSIPlugin, driverName)
	}
	if info.GetEndpoint() != csiSock {
		t.Errorf("GetInfo endpoint: got %q, want the bare path %q", info.GetEndpoint(), csiSock)
	}
	if !highestV1(info.GetSupportedVersions()) {
		t.Errorf("GetInfo versions: got %v, want a 1.x version kubelet accepts", info.GetSupportedVersions())
	}

	// Kubelet's CSI handler dials the endpoint it was given and asks NodeGetInfo.
	node := csi.NewNodeClient(dialLikeKubelet(t, info.GetEndpoint()))
	ni, err := node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil || ni.GetNodeId() != "worker-7" {
		t.Fatalf("NodeGetInfo via the endpoint: got %v, %v, want node worker-7", ni, err)
	}
	if st := r.Status(); st.Notified || r.Err() != nil || st.InfoRequests != 1 {
		t.Errorf("before notification: got %+v, err %v, want not notified, nil error, 1 info request", st, r.Err())
	}

	// Success.
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if st := r.Status(); !st.Notified || !st.Registered || r.Err() != nil {
		t.Errorf("after success: got %+v, err %v, want registered and nil error", st, r.Err())
	}

	// Failure (e.g. kubelet could not reach NodeGetInfo): Err must fail probes.
	msg := "error updating CSINode: driver name conflict"
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: false, Error: msg}); err != nil {
		t.Fatal(err)
	}
	err = r.Err()
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), msg) {
		t.Errorf("after failure: got %v, want FailedPrecondition carrying %q", err, msg)
	}
	if st := r.Status(); st.Registered || st.Error != msg || st.At.IsZero() {
		t.Errorf("after failure: got %+v, want unregistered with kubelet's message", st)
	}

	// A later success (kubelet retries) clears it.
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	if r.Err() != nil {
		t.Errorf("after retry success: got %v, want nil", r.Err())
	}

	// Shutdown removes the socket.
	if err := stop(); err != nil {
		t.Errorf("Serve: got %v, want nil", err)
	}
	if _, err := os.Lstat(wantSock); !os.IsNotExist(err) {
		t.Errorf("after shutdown: got %v, want the socket removed", err)
	}
	logMu.Lock()
	defer logMu.Unlock()
	for _, want := range []string{"registered with kubelet", "kubelet rejected the plugin registration", msg, "socket removed"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs: got %q, want %q in them", logs.String(), want)
		}
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// staleSocket leaves a socket file nobody listens on, as a crashed plugin does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	lis.SetUnlinkOnClose(false)
	lis.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("stale socket: got %v, %v, want a socket file", fi, err)
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	dir := shortDir(t)
	r, err := registration.New(registration.Options{DriverName: driverName, Endpoint: "/csi/csi.sock", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	staleSocket(t, r.SocketPath())
	startRegistrar(t, r)
	info, err := registerapi.NewRegistrationClient(dialLikeKubelet(t, r.SocketPath())).GetInfo(context.Background(), &registerapi.InfoRequest{})
	if err != nil || info.GetName() != driverName {
		t.Errorf("GetInfo on the replaced socket: got %v, %v, want %q", info, err, driverName)
	}
}

func TestLiveSocketKept(t *testing.T) {
	dir := shortDir(t)
	first, err := registration.New(registration.Options{DriverName: driverName, Endpoint: "/csi/a.sock", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	startRegistrar(t, first)
	second, err := registration.New(registration.Options{DriverName: driverName, Endpoint: "/csi/b.sock", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Listen(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second Listen on a live socket: got %v, want FailedPrecondition", err)
	}
	info, err := registerapi.NewRegistrationClient(dialLikeKubelet(t, first.SocketPath())).GetInfo(context.Background(), &registerapi.InfoRequest{})
	if err != nil || info.GetEndpoint() != "/csi/a.sock" {
		t.Errorf("first registrar after the second failed: got %v, %v, want endpoint /csi/a.sock", info, err)
	}
}

func TestNonSocketKept(t *testing.T) {
	dir := shortDir(t)
	r, err := registration.New(registration.Options{DriverName: driverName, Endpoint: "/csi/csi.sock", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.SocketPath(), []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Listen(); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("regular file in the way: got %v, want FailedPrecondition", err)
	}
	if b, err := os.ReadFile(r.SocketPath()); err != nil || string(b) != "not a socket" {
		t.Errorf("regular file: got %q, %v, want it untouched", b, err)
	}
}

func TestMissingDir(t *testing.T) {
	dir := filepath.Join(shortDir(t), "absent")
	r, err := registration.New(registration.Options{DriverName: driverName, Endpoint: "/csi/csi.sock", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Listen(); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("missing registration dir: got %v, want FailedPrecondition", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("missing dir: got %v, want it still missing (not created)", err)
	}
}

func TestSuccessorSocketNotRemoved(t *testing.T) {
	dir := shortDir(t)
	r, err := registration.New(registration.Options{DriverName: driverName, Endpoint: "/csi/csi.sock", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	stop := startRegistrar(t, r)
	// Someone replaces our socket while we run (e.g. the next pod).
	if err := os.Remove(r.SocketPath()); err != nil {
		t.Fatal(err)
	}
	staleSocket(t, r.SocketPath())
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(r.SocketPath()); err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("successor's socket: got %v, %v, want it left in place", fi, err)
	}
}

func TestRelisten(t *testing.T) {
	r, err := registration.New(registration.Options{DriverName: driverName, Endpoint: "/csi/csi.sock", Dir: shortDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Serve(context.Background()); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Serve before Listen: got %v, want FailedPrecondition", err)
	}
	stop := startRegistrar(t, r)
	if err := r.Listen(); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Listen twice: got %v, want FailedPrecondition", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// After a clean stop the same Registrar can serve again.
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Lstat(r.SocketPath()); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run: got %v, want nil", err)
	}
	if _, err := os.Lstat(r.SocketPath()); !os.IsNotExist(err) {
		t.Errorf("after Run: got %v, want the socket removed", err)
	}
}

func TestNewRejects(t *testing.T) {
	long := "/" + strings.Repeat("d", 120)
	for name, o := range map[string]registration.Options{
		"empty name":         {Endpoint: "/csi.sock"},
		"traversal in name":  {DriverName: "../../etc/x", Endpoint: "/csi.sock"},
		"slash in name":      {DriverName: "a/b", Endpoint: "/csi.sock"},
		"name too long":      {DriverName: strings.Repeat("a", 64), Endpoint: "/csi.sock"},
		"name ends with dot": {DriverName: "a.", Endpoint: "/csi.sock"},
		"no endpoint":        {DriverName: driverName},
		"relative endpoint":  {DriverName: driverName, Endpoint: "csi.sock"},
		"tcp endpoint":       {DriverName: driverName, Endpoint: "tcp://127.0.0.1:10000"},
		"socket too long":    {DriverName: driverName, Endpoint: "/csi.sock", Dir: long},
	} {
		if _, err := registration.New(o); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want InvalidArgument", name, err)
		}
	}
}

func TestDefaults(t *testing.T) {
	r, err := registration.New(registration.Options{DriverName: driverName, Endpoint: "/var/lib/kubelet/plugins/x/csi.sock"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "/var/lib/kubelet/plugins_registry/" + driverName + "-reg.sock"; r.SocketPath() != want {
		t.Errorf("default socket: got %q, want %q", r.SocketPath(), want)
	}
	r, err = registration.New(registration.Options{DriverName: driverName, Endpoint: "/csi.sock", SocketPath: "/run/x-reg.sock"})
	if err != nil || r.SocketPath() != "/run/x-reg.sock" {
		t.Errorf("SocketPath override: got %v, %v, want /run/x-reg.sock", r, err)
	}
}

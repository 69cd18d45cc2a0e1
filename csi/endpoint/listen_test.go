package endpoint_test

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/endpoint"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type identity struct {
	csi.UnimplementedIdentityServer
}

func (identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// serve runs a real gRPC server on l until the test ends.
func serve(t *testing.T, l net.Listener) {
	t.Helper()
	srv := grpc.NewServer()
	csi.RegisterIdentityServer(srv, identity{})
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	t.Cleanup(func() { srv.Stop(); <-done })
}

func probe(t *testing.T, target string) error {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient(%q): %v", target, err)
	}
	defer conn.Close()
	_, err = csi.NewIdentityClient(conn).Probe(t.Context(), &csi.ProbeRequest{})
	return err
}

func listen(t *testing.T, ep string, opts endpoint.Options) net.Listener {
	t.Helper()
	l, err := endpoint.Listen(t.Context(), ep, opts)
	if err != nil {
		t.Fatalf("Listen(%q): %v", ep, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func TestListenUnixServesGRPC(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a", "b", "csi.sock")
	l := listen(t, "unix://"+path, endpoint.Options{})
	serve(t, l)
	if err := probe(t, "unix://"+path); err != nil {
		t.Fatalf("Probe over %s: %v", path, err)
	}
	if got := mode(t, path); got.Type() != fs.ModeSocket || got.Perm() != 0o660 {
		t.Errorf("socket mode: got %v, want socket with 0660", got)
	}
	if got := mode(t, filepath.Dir(path)).Perm(); got&^0o750 != 0 {
		t.Errorf("created directory mode: got %#o, want within 0750", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 || entries[0].Name() != "csi.sock" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory contents: got %v, want only csi.sock (no temporary leftovers)", names)
	}
}

func TestListenSocketMode(t *testing.T) {
	for _, m := range []fs.FileMode{0o600, 0o666, 0o700} {
		path := filepath.Join(t.TempDir(), "csi.sock")
		l := listen(t, path, endpoint.Options{SocketMode: m})
		if got := mode(t, path).Perm(); got != m {
			t.Errorf("SocketMode %#o: got %#o", m, got)
		}
		l.Close()
	}
}

func TestListenExistingDirModeUntouched(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	listen(t, filepath.Join(dir, "csi.sock"), endpoint.Options{DirMode: 0o700})
	if got := mode(t, dir).Perm(); got != 0o755 {
		t.Errorf("existing directory mode: got %#o, want 0755 unchanged", got)
	}
}

func TestCloseRemovesSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "csi.sock")
	l, err := endpoint.Listen(t.Context(), path, endpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Close, Lstat(%s): got %v, want not-exist", path, err)
	}
	l.Close() // a second Close must not panic or remove anything
}

func TestCloseLeavesReplacement(t *testing.T) {
	path := filepath.Join(t.TempDir(), "csi.sock")
	l, err := endpoint.Listen(t.Context(), path, endpoint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Someone else replaced the socket file (e.g. a new instance after an
	// operator removed ours); our Close must not remove theirs.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("theirs"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if b, err := os.ReadFile(path); err != nil || string(b) != "theirs" {
		t.Errorf("after Close, replacement file: got %q, %v; want %q", b, err, "theirs")
	}
}

// staleSocket leaves a socket file at path that nobody listens on, as a
// crashed driver would.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	if mode(t, path).Type() != fs.ModeSocket {
		t.Fatalf("setup: %s is not a socket", path)
	}
}

func TestListenRemovesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "csi.sock")
	staleSocket(t, path)
	serve(t, listen(t, path, endpoint.Options{}))
	if err := probe(t, "unix://"+path); err != nil {
		t.Fatalf("Probe after replacing a stale socket: %v", err)
	}
}

func TestListenRefusesLiveSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "csi.sock")
	live := listen(t, path, endpoint.Options{})
	serve(t, live)
	_, err := endpoint.Listen(t.Context(), path, endpoint.Options{})
	if got := status.Code(err); got != codes.AlreadyExists {
		t.Fatalf("Listen on a live socket: got %v (%v), want AlreadyExists", got, err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the path %s", err, path)
	}
	if err := probe(t, "unix://"+path); err != nil {
		t.Errorf("the live server stopped answering after a refused Listen: %v", err)
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{file, sub, link} {
		_, err := endpoint.Listen(t.Context(), p, endpoint.Options{})
		if got := status.Code(err); got != codes.FailedPrecondition {
			t.Errorf("Listen(%s): got %v (%v), want FailedPrecondition", p, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %s", err, p)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "data" {
		t.Errorf("regular file after refused Listen: got %q, %v; want it untouched", b, err)
	}
	if fi, err := os.Stat(sub); err != nil || !fi.IsDir() {
		t.Errorf("directory after refused Listen: %v; want it untouched", err)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("symlink after refused Listen: %v; want it untouched", err)
	}
}

func TestListenPathTooLong(t *testing.T) {
	for _, path := range []string{
		"/" + strings.Repeat("x", 200) + "/csi.sock",
		// Short enough to bind, but the temporary socket inside its
		// directory would not be: refused before anything is touched.
		"/" + strings.Repeat("x", 94) + "/s",
	} {
		_, err := endpoint.Listen(t.Context(), path, endpoint.Options{})
		if got := status.Code(err); got != codes.InvalidArgument {
			t.Errorf("Listen on a %d-byte path: got %v (%v), want InvalidArgument", len(path), got, err)
		}
		if _, err := os.Lstat(filepath.Dir(path)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Listen on a too long path created %s", filepath.Dir(path))
		}
	}
}

func TestListenBadEndpoint(t *testing.T) {
	_, err := endpoint.Listen(t.Context(), "relative.sock", endpoint.Options{})
	if got := status.Code(err); got != codes.InvalidArgument {
		t.Fatalf("Listen(relative.sock): got %v, want InvalidArgument", got)
	}
}

func TestListenConcurrentOneWins(t *testing.T) {
	path := filepath.Join(t.TempDir(), "csi.sock")
	const n = 8
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		listeners []net.Listener
		errs      []error
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := endpoint.Listen(context.Background(), path, endpoint.Options{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			listeners = append(listeners, l)
		}()
	}
	wg.Wait()
	for _, l := range listeners {
		defer l.Close()
	}
	if len(listeners) != 1 {
		t.Fatalf("concurrent Listen: %d succeeded, want exactly 1 (errors: %v)", len(listeners), errs)
	}
	for _, err := range errs {
		if c := status.Code(err); c != codes.AlreadyExists {
			t.Errorf("losing Listen: got %v (%v), want AlreadyExists", c, err)
		}
	}
	serve(t, listeners[0])
	if err := probe(t, "unix://"+path); err != nil {
		t.Errorf("Probe on the winner: %v", err)
	}
}

func TestListenTCP(t *testing.T) {
	l := listen(t, "tcp://127.0.0.1:0", endpoint.Options{})
	serve(t, l)
	if err := probe(t, l.Addr().String()); err != nil {
		t.Fatalf("Probe over TCP: %v", err)
	}
}

func TestListenCanceledContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "csi.sock")
	staleSocket(t, path)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	l, err := endpoint.Listen(ctx, path, endpoint.Options{})
	if err == nil {
		l.Close()
		t.Fatal("Listen with a canceled context: got nil error")
	}
	if c := status.Code(err); c != codes.Canceled {
		t.Errorf("Listen with a canceled context: got %v (%v), want Canceled", c, err)
	}
}

func TestErrorsWrapCause(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The parent "directory" is a regular file: MkdirAll fails with ENOTDIR.
	_, err := endpoint.Listen(t.Context(), filepath.Join(file, "csi.sock"), endpoint.Options{})
	if err == nil {
		t.Fatal("Listen under a regular file: got nil error")
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		t.Errorf("error %v does not wrap the *fs.PathError cause", err)
	}
	if c := status.Code(err); c != codes.FailedPrecondition {
		t.Errorf("code: got %v, want FailedPrecondition", c)
	}
}

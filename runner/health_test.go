package runner_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csikit/csikit/runner"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// running starts g and returns when every part started; the group stops at
// the end of the test.
func running(t *testing.T, g *runner.Group) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for g.Check(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("group not healthy: %v", g.Check(context.Background()))
		}
		time.Sleep(time.Millisecond)
	}
}

func idle(ctx context.Context) error { <-ctx.Done(); return nil }

// TestReadyzNamesTheFailingCheck: a failing readiness check flips /readyz
// to 503 and names it, /healthz stays 200; a failing liveness check flips
// both; ?verbose lists every check by name.
func TestReadyzNamesTheFailingCheck(t *testing.T) {
	var backend, alive atomic.Pointer[error]
	fail := func(p *atomic.Pointer[error], err error) { p.Store(&err) }
	check := func(p *atomic.Pointer[error]) func(context.Context) error {
		return func(context.Context) error {
			if e := p.Load(); e != nil {
				return *e
			}
			return nil
		}
	}
	g := runner.New(runner.Options{})
	g.Add("csi", runner.Func(idle))
	g.AddReadyzCheck("backend", check(&backend))
	g.AddHealthzCheck("journal", check(&alive))
	web := httptest.NewServer(g.HealthHandler())
	defer web.Close()
	running(t, g)

	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, web.URL+path); code != 200 || body != "ok\n" {
			t.Errorf("GET %s: %d %q, want 200 \"ok\\n\"", path, code, body)
		}
	}
	code, body := get(t, web.URL+"/readyz?verbose")
	want := "[+]running ok\n[+]csi ok\n[+]backend ok\n[+]journal ok\nreadyz check passed\n"
	if code != 200 || body != want {
		t.Errorf("GET /readyz?verbose: %d %q, want 200 %q", code, body, want)
	}
	if _, body := get(t, web.URL+"/healthz?verbose"); strings.Contains(body, "backend") {
		t.Errorf("/healthz lists the readiness check backend:\n%s", body)
	}

	fail(&backend, errors.New("monitors unreachable\nretrying"))
	code, body = get(t, web.URL+"/readyz")
	if code != 503 || !strings.Contains(body, "[-]backend failed: monitors unreachable; retrying\n") || !strings.Contains(body, "[+]csi ok\n") {
		t.Errorf("GET /readyz with backend failing: %d %q, want 503 naming backend", code, body)
	}
	if code, body := get(t, web.URL+"/healthz"); code != 200 {
		t.Errorf("GET /healthz with a readiness check failing: %d %q, want 200", code, body)
	}
	backend.Store(nil)

	fail(&alive, status.Error(codes.FailedPrecondition, "journal: disk full"))
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := get(t, web.URL+path); code != 503 || !strings.Contains(body, "[-]journal failed: ") || !strings.Contains(body, "disk full") {
			t.Errorf("GET %s with journal failing: %d %q, want 503 naming journal", path, code, body)
		}
	}
	if err := g.Ready(context.Background()); err == nil || !strings.Contains(err.Error(), "journal: ") {
		t.Errorf("Ready: %v, want journal's failure", err)
	}
	if code, _ := get(t, web.URL+"/other"); code != 404 {
		t.Errorf("GET /other: %d, want 404", code)
	}
}

// TestReadyzFailsOnceShutdownBegins: while the parts drain, the group is
// not ready but still alive until the part behind the check exits.
func TestReadyzFailsOnceShutdownBegins(t *testing.T) {
	g := runner.New(runner.Options{})
	release := make(chan struct{})
	draining := make(chan struct{})
	g.Add("http", runner.Func(idle))
	g.Add("csi", runner.Func(func(ctx context.Context) error {
		<-ctx.Done()
		close(draining)
		<-release
		return nil
	}))
	web := httptest.NewServer(g.HealthHandler())
	defer web.Close()
	if code, body := get(t, web.URL+"/readyz"); code != 503 || !strings.Contains(body, "[-]running failed: not started") {
		t.Errorf("/readyz before Run: %d %q", code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	for g.Ready(context.Background()) != nil {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-draining
	if code, body := get(t, web.URL+"/readyz"); code != 503 || !strings.Contains(body, "[-]running failed: shutting down") {
		t.Errorf("/readyz while draining: %d %q, want 503 shutting down", code, body)
	}
	if code, body := get(t, web.URL+"/healthz"); code != 200 {
		t.Errorf("/healthz while draining: %d %q, want 200", code, body)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, web.URL+"/healthz"); code != 503 || !strings.Contains(body, "stopped") {
		t.Errorf("/healthz after Run: %d %q, want 503 stopped", code, body)
	}
}

func TestNamesAreUnique(t *testing.T) {
	g := runner.New(runner.Options{})
	g.Add("csi", runner.Func(idle))
	defer func() {
		if recover() == nil {
			t.Error("a check named like a part: no panic")
		}
	}()
	g.AddHealthzCheck("csi", func(context.Context) error { return nil })
}

type fakeIdentity struct {
	resp *csi.ProbeResponse
	err  error
}

func (f fakeIdentity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return f.resp, f.err
}

func TestProbeCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    fakeIdentity
		want string // "" passes
	}{
		{"ready", fakeIdentity{resp: &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}}, ""},
		{"ready unset", fakeIdentity{resp: &csi.ProbeResponse{}}, ""},
		{"not ready", fakeIdentity{resp: &csi.ProbeResponse{Ready: wrapperspb.Bool(false)}}, "plugin is not ready yet"},
		{"probe error", fakeIdentity{err: status.Error(codes.FailedPrecondition, "backend down")}, "FailedPrecondition: backend down"},
	} {
		err := runner.ProbeCheck(tc.p)(context.Background())
		if (tc.want == "" && err != nil) || (tc.want != "" && (err == nil || err.Error() != tc.want)) {
			t.Errorf("%s: ProbeCheck = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A request running when the context ends completes before Run returns;
// after it, the port refuses connections.
func TestHTTPServerGracefulShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	entered, release := make(chan struct{}), make(chan struct{})
	h := &runner.HTTPServer{Listener: ln, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "done")
	})}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- h.Run(ctx) }()
	type result struct {
		code int
		body string
	}
	res := make(chan result, 1)
	go func() {
		code, body := get(t, url)
		res <- result{code, body}
	}()
	<-entered
	cancel()
	select {
	case err := <-stopped:
		t.Fatalf("Run returned %v while a request was running, want it to wait", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if r := <-res; r.code != 200 || r.body != "done" {
		t.Errorf("in-flight request: got %d %q, want 200 \"done\"", r.code, r.body)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Run: got %v, want nil", err)
	}
	if _, err := http.Get(url); err == nil {
		t.Error("GET after shutdown: got a response, want a connection error")
	}
}

func TestHTTPServerBadAddress(t *testing.T) {
	err := (&runner.HTTPServer{Addr: "256.0.0.1:bad", Handler: http.NotFoundHandler()}).Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Errorf("Run(bad address): got %v, want a listen error", err)
	}
}

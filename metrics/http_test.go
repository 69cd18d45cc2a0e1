package metrics_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
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

// serve runs metrics.Serve on a free loopback port and returns its base
// URL and a stop function that ends ctx and returns Serve's result.
func serve(t *testing.T, opts metrics.HTTPOptions) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- metrics.Serve(ctx, ln, opts) }()
	stopped := false
	var result error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-errc
		}
		return result
	}
	t.Cleanup(func() { stop() })
	return "http://" + ln.Addr().String(), stop
}

type fakeIdentity struct {
	csi.UnimplementedIdentityServer
	resp *csi.ProbeResponse
	err  error
}

func (f fakeIdentity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return f.resp, f.err
}

func TestServeHealthz(t *testing.T) {
	for _, tc := range []struct {
		name     string
		probe    func(context.Context) error
		wantCode int
		wantBody string
	}{
		{"no probe", nil, 200, "ok\n"},
		{"ready", metrics.IdentityProbe(fakeIdentity{resp: &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}}), 200, "ok\n"},
		{"ready unset", metrics.IdentityProbe(fakeIdentity{resp: &csi.ProbeResponse{}}), 200, "ok\n"},
		{"not ready", metrics.IdentityProbe(fakeIdentity{resp: &csi.ProbeResponse{Ready: wrapperspb.Bool(false)}}), 503, "not ready: probe: plugin is not ready yet\n"},
		{"probe error", metrics.IdentityProbe(fakeIdentity{err: status.Error(codes.FailedPrecondition, "backend down")}), 503, "not ready: probe: FailedPrecondition: backend down\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, stop := serve(t, metrics.HTTPOptions{Probe: tc.probe})
			code, body := get(t, url+"/healthz")
			if code != tc.wantCode || body != tc.wantBody {
				t.Errorf("GET /healthz: got %d %q, want %d %q", code, body, tc.wantCode, tc.wantBody)
			}
			if err := stop(); err != nil {
				t.Errorf("Serve: got %v, want nil after ctx ends", err)
			}
		})
	}
}

func TestServeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "csikit_test_gauge", Help: "test"})
	g.Set(42)
	reg.MustRegister(g)
	url, _ := serve(t, metrics.HTTPOptions{Gatherer: reg})
	code, body := get(t, url+"/metrics")
	if code != 200 || !strings.Contains(body, "csikit_test_gauge 42") {
		t.Errorf("GET /metrics: got %d %q, want 200 with csikit_test_gauge 42", code, body)
	}
	if code, _ := get(t, url+"/other"); code != 404 {
		t.Errorf("GET /other: got %d, want 404", code)
	}

	// Without a Gatherer there is no /metrics.
	url2, _ := serve(t, metrics.HTTPOptions{})
	if code, _ := get(t, url2+"/metrics"); code != 404 {
		t.Errorf("GET /metrics without a Gatherer: got %d, want 404", code)
	}
}

// A request running when ctx ends completes before Serve returns.
func TestServeGracefulShutdown(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	url, stop := serve(t, metrics.HTTPOptions{Probe: func(ctx context.Context) error {
		close(entered)
		<-release
		return nil
	}})
	type result struct {
		code int
		body string
	}
	res := make(chan result, 1)
	go func() {
		code, body := get(t, url+"/healthz")
		res <- result{code, body}
	}()
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		t.Fatalf("Serve returned %v while a request was running, want it to wait", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if r := <-res; r.code != 200 || r.body != "ok\n" {
		t.Errorf("in-flight request: got %d %q, want 200 \"ok\\n\"", r.code, r.body)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve: got %v, want nil", err)
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("GET after shutdown: got a response, want a connection error")
	}
}

func TestListenAndServeBadAddress(t *testing.T) {
	err := metrics.ListenAndServe(context.Background(), "256.0.0.1:bad", metrics.HTTPOptions{})
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		t.Errorf("ListenAndServe(bad address): got %v, want a listen error", err)
	}
}

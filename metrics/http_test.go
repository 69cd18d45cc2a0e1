package metrics_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/csikit/csikit/metrics"
	"github.com/prometheus/client_golang/prometheus"
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

func serve(t *testing.T, opts metrics.HTTPOptions) string {
	t.Helper()
	srv := httptest.NewServer(metrics.Handler(opts))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestServeMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "csikit_test_gauge", Help: "test"})
	g.Set(42)
	reg.MustRegister(g)
	url := serve(t, metrics.HTTPOptions{Gatherer: reg})
	code, body := get(t, url+"/metrics")
	if code != 200 || !strings.Contains(body, "csikit_test_gauge 42") {
		t.Errorf("GET /metrics: got %d %q, want 200 with csikit_test_gauge 42", code, body)
	}
	// Health is runner's: metrics serves no /healthz.
	for _, path := range []string{"/other", "/healthz"} {
		if code, _ := get(t, url+path); code != 404 {
			t.Errorf("GET %s: got %d, want 404", path, code)
		}
	}

	// Without a Gatherer there is no /metrics.
	url2 := serve(t, metrics.HTTPOptions{})
	if code, _ := get(t, url2+"/metrics"); code != 404 {
		t.Errorf("GET /metrics without a Gatherer: got %d, want 404", code)
	}
}

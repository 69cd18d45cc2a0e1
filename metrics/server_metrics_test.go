package metrics_test

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/metrics"
	"github.com/csikit/csikit/stats"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

const secretValue = "s3cr3t-Passw0rd"

// testNode is a small CSI node service for driving real RPCs.
type testNode struct {
	csi.UnimplementedNodeServer
	entered chan struct{} // NodeUnstageVolume signals it is running
	release chan struct{} // and waits for this
}

func (n *testNode) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	return stats.Config{AllowUnmounted: true}.VolumeStats(ctx, req.GetVolumePath())
}

func (n *testNode) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if req.GetVolumeCapability() == nil {
		return nil, status.Error(codes.InvalidArgument, "volume_capability is missing")
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (n *testNode) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	n.entered <- struct{}{}
	<-n.release
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (n *testNode) NodeGetInfo(ctx context.Context, req *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	panic("driver bug")
}

// recovery stands in for the root package's recovery interceptor.
func recovery(m *metrics.ServerMetrics) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				m.PanicRecovered(info.FullMethod)
				err = status.Error(codes.Internal, "panic recovered")
			}
		}()
		return h(ctx, req)
	}
}

// startServer runs a gRPC server with recovery -> metrics on an in-memory
// listener and returns a connected node client.
func startServer(t *testing.T, m *metrics.ServerMetrics, node *testNode) csi.NodeClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(recovery(m), m.UnaryServerInterceptor()))
	csi.RegisterNodeServer(srv, node)
	go srv.Serve(lis)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	return csi.NewNodeClient(conn)
}

func scrape(t *testing.T, url string) (string, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: got %s, want 200 OK", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parsing the exposition: %v\n%s", err, body)
	}
	return string(body), fams
}

// histCount returns the sample count of the operations histogram series
// with the given labels, and -1 when there is none.
func histCount(fams map[string]*dto.MetricFamily, method, code string) int64 {
	fam := fams[metrics.OperationsSecondsName]
	for _, m := range fam.GetMetric() {
		l := map[string]string{}
		for _, lp := range m.GetLabel() {
			l[lp.GetName()] = lp.GetValue()
		}
		if l["driver_name"] == "test.csikit.io" && l["method_name"] == method && l["grpc_status_code"] == code {
			return int64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

func TestServerMetricsScrape(t *testing.T) {
	m := metrics.NewServerMetrics(metrics.ServerOptions{
		DriverName: "test.csikit.io",
		LockStats:  func() (int, time.Duration) { return 2, 1500 * time.Millisecond },
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	node := &testNode{entered: make(chan struct{}), release: make(chan struct{})}
	client := startServer(t, m, node)
	web := httptest.NewServer(metrics.Handler(metrics.HTTPOptions{Gatherer: reg}))
	defer web.Close()
	ctx := context.Background()

	for range 3 {
		if _, err := client.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "v", VolumePath: t.TempDir()}); err != nil {
			t.Fatalf("NodeGetVolumeStats: %v", err)
		}
	}
	if _, err := client.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "v", VolumePath: "/does/not/exist"}); status.Code(err) != codes.NotFound {
		t.Fatalf("NodeGetVolumeStats(missing): got %v, want NotFound", err)
	}
	for range 2 {
		_, err := client.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
			VolumeId: "v", StagingTargetPath: "/staging", Secrets: map[string]string{"password": secretValue},
		})
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("NodeStageVolume: got %v, want InvalidArgument", err)
		}
	}
	if _, err := client.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}); status.Code(err) != codes.Internal {
		t.Fatalf("NodeGetInfo (panics): got %v, want Internal", err)
	}
	if _, err := client.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("NodeExpandVolume: got %v, want Unimplemented", err)
	}

	// One call held in the handler: in-flight shows 1 for its method.
	done := make(chan error, 1)
	go func() {
		_, err := client.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: "v", StagingTargetPath: "/staging"})
		done <- err
	}()
	<-node.entered
	const unstage = "/csi.v1.Node/NodeUnstageVolume"
	want := `
# HELP csi_plugin_inflight_requests CSI requests being served, by gRPC method.
# TYPE csi_plugin_inflight_requests gauge
csi_plugin_inflight_requests{driver_name="test.csikit.io",method_name="/csi.v1.Node/NodeExpandVolume"} 0
csi_plugin_inflight_requests{driver_name="test.csikit.io",method_name="/csi.v1.Node/NodeGetInfo"} 0
csi_plugin_inflight_requests{driver_name="test.csikit.io",method_name="/csi.v1.Node/NodeGetVolumeStats"} 0
csi_plugin_inflight_requests{driver_name="test.csikit.io",method_name="/csi.v1.Node/NodeStageVolume"} 0
csi_plugin_inflight_requests{driver_name="test.csikit.io",method_name="/csi.v1.Node/NodeUnstageVolume"} 1
# HELP csi_plugin_panics_recovered_total Panics recovered in CSI request handlers, by gRPC method.
# TYPE csi_plugin_panics_recovered_total counter
csi_plugin_panics_recovered_total{driver_name="test.csikit.io",method_name="/csi.v1.Node/NodeGetInfo"} 1
# HELP csi_plugin_volume_lock_oldest_seconds Age in seconds of the oldest volume lock currently held (0 when none is held).
# TYPE csi_plugin_volume_lock_oldest_seconds gauge
csi_plugin_volume_lock_oldest_seconds{driver_name="test.csikit.io"} 1.5
# HELP csi_plugin_volume_locks_held Volume, name and snapshot locks currently held.
# TYPE csi_plugin_volume_locks_held gauge
csi_plugin_volume_locks_held{driver_name="test.csikit.io"} 2
`
	if err := testutil.ScrapeAndCompare(web.URL+"/metrics", strings.NewReader(want),
		metrics.InflightRequestsName, metrics.PanicsRecoveredName, metrics.VolumeLockOldestName, metrics.VolumeLocksHeldName); err != nil {
		t.Errorf("scrape while a call is in flight: %v", err)
	}
	close(node.release)
	if err := <-done; err != nil {
		t.Fatalf("NodeUnstageVolume: %v", err)
	}

	body, fams := scrape(t, web.URL+"/metrics")
	for _, tc := range []struct {
		method, code string
		want         int64
	}{
		{"/csi.v1.Node/NodeGetVolumeStats", "OK", 3},
		{"/csi.v1.Node/NodeGetVolumeStats", "NotFound", 1},
		{"/csi.v1.Node/NodeStageVolume", "InvalidArgument", 2},
		{"/csi.v1.Node/NodeGetInfo", "Internal", 1},
		{"/csi.v1.Node/NodeExpandVolume", "Unimplemented", 1},
		{unstage, "OK", 1},
		{"/csi.v1.Node/NodeStageVolume", "OK", -1},
	} {
		if got := histCount(fams, tc.method, tc.code); got != tc.want {
			t.Errorf("%s{method_name=%q,grpc_status_code=%q} count: got %d, want %d", metrics.OperationsSecondsName, tc.method, tc.code, got, tc.want)
		}
	}
	fam := fams[metrics.OperationsSecondsName]
	var bounds []float64
	for _, b := range fam.GetMetric()[0].GetHistogram().GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			bounds = append(bounds, b.GetUpperBound())
		}
	}
	if fam.GetType() != dto.MetricType_HISTOGRAM || !slices.Equal(bounds, metrics.DefaultBuckets) {
		t.Errorf("operations metric: got %v with buckets %v, want a histogram with csi-lib-utils' %v", fam.GetType(), bounds, metrics.DefaultBuckets)
	}
	if strings.Contains(body, secretValue) || strings.Contains(body, "password") {
		t.Errorf("a secret from a request reached the exposition:\n%s", body)
	}
	if got := testutil.ToFloat64(prometheus.CollectorFunc(func(ch chan<- prometheus.Metric) {
		ch <- mustOne(t, m, metrics.InflightRequestsName, unstage)
	})); got != 0 {
		t.Errorf("in-flight after the call returned: got %v, want 0", got)
	}
}

// mustOne finds the series of name whose method_name is method.
func mustOne(t *testing.T, c prometheus.Collector, name, method string) prometheus.Metric {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ch); close(ch) }()
	var found prometheus.Metric
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m.Desc().String(), `"`+name+`"`) {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == "method_name" && l.GetValue() == method {
				found = m
			}
		}
	}
	if found == nil {
		t.Fatalf("no %s{method_name=%q}", name, method)
	}
	return found
}

// A nil *ServerMetrics is what a server without a registry installs.
func TestNilServerMetrics(t *testing.T) {
	var m *metrics.ServerMetrics
	m.PanicRecovered("/csi.v1.Node/NodeGetInfo")
	called := false
	resp, err := m.UnaryServerInterceptor()(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: "/x"},
		func(ctx context.Context, req any) (any, error) { called = true; return "resp", nil })
	if !called || resp != "resp" || err != nil {
		t.Errorf("nil interceptor: got (%v, %v, called=%v), want (resp, nil, true)", resp, err, called)
	}
}

// Without LockStats the lock gauges are absent; the registry stays
// consistent (pedantic registry checks Describe against Collect).
func TestServerMetricsNoLocks(t *testing.T) {
	m := metrics.NewServerMetrics(metrics.ServerOptions{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	_, _ = m.UnaryServerInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Identity/Probe"},
		func(ctx context.Context, req any) (any, error) {
			return nil, status.Error(codes.FailedPrecondition, "not ready")
		})
	n, err := testutil.GatherAndCount(reg, metrics.VolumeLocksHeldName, metrics.VolumeLockOldestName)
	if err != nil || n != 0 {
		t.Errorf("lock series without LockStats: got %d (%v), want 0", n, err)
	}
	want := `
# HELP csi_plugin_inflight_requests CSI requests being served, by gRPC method.
# TYPE csi_plugin_inflight_requests gauge
csi_plugin_inflight_requests{driver_name="unknown-driver",method_name="/csi.v1.Identity/Probe"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), metrics.InflightRequestsName); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m, metrics.OperationsSecondsName); n != 1 {
		t.Errorf("operations series: got %d, want 1", n)
	}
}

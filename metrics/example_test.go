package metrics_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Register the operations metrics on your own registry and install the
// interceptor in the server's chain.
func ExampleNewServerMetrics() {
	m := metrics.NewServerMetrics(metrics.ServerOptions{DriverName: "block.vendor.example"})
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(m.UnaryServerInterceptor()))

	// What the server does for each call:
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Controller/CreateVolume"}
	_, _ = m.UnaryServerInterceptor()(context.Background(), &csi.CreateVolumeRequest{}, info,
		func(ctx context.Context, req any) (any, error) {
			return nil, status.Error(codes.InvalidArgument, "name is empty")
		})

	want := `
# HELP csi_plugin_inflight_requests CSI requests being served, by gRPC method.
# TYPE csi_plugin_inflight_requests gauge
csi_plugin_inflight_requests{driver_name="block.vendor.example",method_name="/csi.v1.Controller/CreateVolume"} 0
`
	fmt.Println(testutil.GatherAndCompare(reg, strings.NewReader(want), metrics.InflightRequestsName))
	fmt.Println(testutil.CollectAndCount(m, metrics.OperationsSecondsName))
	// Output:
	// <nil>
	// 1
}

// A node plugin exposes per-volume usage for the volumes it published.
func ExampleNewVolumeStatsCollector() {
	published := func(ctx context.Context) ([]metrics.PublishedVolume, error) {
		// From the driver's own state, e.g. its NodePublishVolume records.
		return []metrics.PublishedVolume{{ID: "vol-1", Path: "/var/lib/kubelet/pods/p/volumes/kubernetes.io~csi/pv/mount"}}, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewVolumeStatsCollector(metrics.VolumeStatsOptions{
		DriverName: "block.vendor.example", Volumes: published, Timeout: 5 * time.Second,
	}))
}

// Handler mounts on any server, here httptest.
func ExampleHandler() {
	srv := httptest.NewServer(metrics.Handler(metrics.HTTPOptions{
		Gatherer: prometheus.NewRegistry(),
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	fmt.Println(resp.Status)
	// Output:
	// 200 OK
}

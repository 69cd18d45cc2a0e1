package metrics_test

import (
	"context"
	"testing"

	"github.com/csikit/csikit/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The interceptor's cost per call: "none" is the bare handler call,
// "nil" a server without a registry, "ok"/"error" with metrics on.
func BenchmarkUnaryServerInterceptor(b *testing.B) {
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Node/NodeGetVolumeStats"}
	ok := func(ctx context.Context, req any) (any, error) { return req, nil }
	failErr := status.Error(codes.NotFound, "no such volume")
	fail := func(ctx context.Context, req any) (any, error) { return nil, failErr }
	m := metrics.NewServerMetrics(metrics.ServerOptions{DriverName: "bench"})
	prometheus.NewRegistry().MustRegister(m)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		ic   grpc.UnaryServerInterceptor
		h    grpc.UnaryHandler
	}{
		{"none", func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			return h(ctx, req)
		}, ok},
		{"nil", (*metrics.ServerMetrics)(nil).UnaryServerInterceptor(), ok},
		{"ok", m.UnaryServerInterceptor(), ok},
		{"error", m.UnaryServerInterceptor(), fail},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = bc.ic(ctx, "req", info, bc.h)
			}
		})
		b.Run(bc.name+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, _ = bc.ic(ctx, "req", info, bc.h)
				}
			})
		})
	}
}

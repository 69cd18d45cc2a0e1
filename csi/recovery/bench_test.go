package recovery_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/csikit/csikit/csi/recovery"
	"google.golang.org/grpc"
)

// BenchmarkInterceptor: the cost on a call that does not panic.
func BenchmarkInterceptor(b *testing.B) {
	i := recovery.UnaryServerInterceptor(recovery.Options{Logger: slog.New(slog.DiscardHandler)})
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Identity/Probe"}
	h := func(context.Context, any) (any, error) { return nil, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		i(ctx, nil, info, h)
	}
}

// BenchmarkInterceptorPanic: the cost of a recovered panic (stack capture).
func BenchmarkInterceptorPanic(b *testing.B) {
	i := recovery.UnaryServerInterceptor(recovery.Options{Logger: slog.New(slog.DiscardHandler)})
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Identity/Probe"}
	h := func(context.Context, any) (any, error) { panic("boom") }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		i(ctx, nil, info, h)
	}
}

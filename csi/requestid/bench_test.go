package requestid_test

import (
	"context"
	"testing"

	"github.com/csikit/csikit/csi/requestid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

func benchInterceptor(b *testing.B, ctx context.Context) {
	i := requestid.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Identity/Probe"}
	h := func(context.Context, any) (any, error) { return nil, nil }
	b.ReportAllocs()
	for b.Loop() {
		i(ctx, nil, info, h)
	}
}

// BenchmarkInterceptorGenerated: no ID in metadata (the usual CO call).
func BenchmarkInterceptorGenerated(b *testing.B) {
	md := metadata.MD{":authority": {"localhost"}, "content-type": {"application/grpc"}, "user-agent": {"grpc-go"}}
	benchInterceptor(b, metadata.NewIncomingContext(context.Background(), md))
}

// BenchmarkInterceptorFromMetadata: the client sent an ID.
func BenchmarkInterceptorFromMetadata(b *testing.B) {
	md := metadata.MD{requestid.MetadataKey: {"trace-0123456789"}, "content-type": {"application/grpc"}}
	benchInterceptor(b, metadata.NewIncomingContext(context.Background(), md))
}

// BenchmarkFromContextGenerated: formatting a generated ID (paid per log line).
func BenchmarkFromContextGenerated(b *testing.B) {
	var ctx context.Context
	requestid.UnaryServerInterceptor()(context.Background(), nil, &grpc.UnaryServerInfo{},
		func(c context.Context, _ any) (any, error) { ctx = c; return nil, nil })
	b.ReportAllocs()
	for b.Loop() {
		requestid.FromContext(ctx)
	}
}

package recovery_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/csikit/csikit/csi/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

func ExampleUnaryServerInterceptor() {
	panics := 0
	interceptor := recovery.UnaryServerInterceptor(recovery.Options{
		Logger:  slog.New(slog.DiscardHandler), // use the driver's logger
		OnPanic: func(context.Context, string, any) { panics++ },
	})
	// On a server: grpc.NewServer(grpc.ChainUnaryInterceptor(..., interceptor, ...)).
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Controller/CreateVolume"}
	_, err := interceptor(context.Background(), nil, info, func(context.Context, any) (any, error) {
		panic("driver bug")
	})
	fmt.Println(status.Code(err), panics)
	fmt.Println(status.Convert(err).Message())
	// Output:
	// Internal 1
	// internal error in /csi.v1.Controller/CreateVolume; see the plugin's log
}

// exampleStream is the stream a handler gets; only its context is used here.
type exampleStream struct{ grpc.ServerStream }

func (exampleStream) Context() context.Context { return context.Background() }

func ExampleStreamServerInterceptor() {
	panics := 0
	interceptor := recovery.StreamServerInterceptor(recovery.Options{
		Logger:  slog.New(slog.DiscardHandler), // use the driver's logger
		OnPanic: func(context.Context, string, any) { panics++ },
	})
	// On a server: grpc.NewServer(grpc.ChainStreamInterceptor(..., interceptor, ...)).
	info := &grpc.StreamServerInfo{FullMethod: "/csi.v1.SnapshotMetadata/GetMetadataAllocated", IsServerStream: true}
	err := interceptor(nil, exampleStream{}, info, func(any, grpc.ServerStream) error {
		panic("driver bug")
	})
	fmt.Println(status.Code(err), panics)
	// Output:
	// Internal 1
}

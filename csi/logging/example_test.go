package logging_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/logging"
	"github.com/csikit/csikit/csi/recovery"
	"github.com/csikit/csikit/csi/requestid"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// stable drops the attributes that change from run to run.
func stable(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey || a.Key == logging.KeyDuration {
		return slog.Attr{}
	}
	return a
}

// call runs one call through interceptor as a gRPC server would.
func call(interceptor grpc.UnaryServerInterceptor, method string, req any, h grpc.UnaryHandler) {
	ctx := requestid.NewContext(context.Background(), "req-1")
	interceptor(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, h)
}

func ExampleUnaryServerInterceptor() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: stable}))

	// On a server, in the order csikit uses:
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(
		requestid.UnaryServerInterceptor(),
		logging.UnaryServerInterceptor(logger, logging.Options{}),
		recovery.UnaryServerInterceptor(recovery.Options{Logger: logger}),
	))

	interceptor := logging.UnaryServerInterceptor(logger, logging.Options{})
	req := &csi.DeleteVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"token": "hunter2"}}
	call(interceptor, "/csi.v1.Controller/DeleteVolume", req, func(context.Context, any) (any, error) {
		return nil, status.Error(codes.FailedPrecondition, "vol-1 has snapshots")
	})
	// Output:
	// level=DEBUG msg="call started" method=/csi.v1.Controller/DeleteVolume request_id=req-1 request="{\"volume_id\":\"vol-1\",\"secrets\":{\"token\":\"***stripped***\"}}"
	// level=WARN msg="call finished" method=/csi.v1.Controller/DeleteVolume request_id=req-1 code=FailedPrecondition error="vol-1 has snapshots"
}

// Drivers that log through logr (controller-runtime, klog's structured
// logging) hand the interceptor a slog view of their logr.Logger.
func ExampleUnaryServerInterceptor_logr() {
	var lg logr.Logger = funcr.New(func(prefix, args string) { fmt.Println(args) }, funcr.Options{
		Verbosity:      4, // V(4) is slog's Debug
		RenderArgsHook: dropDuration,
	})
	logger := slog.New(logr.ToSlogHandler(lg))

	interceptor := logging.UnaryServerInterceptor(logger, logging.Options{})
	call(interceptor, "/csi.v1.Identity/Probe", &csi.ProbeRequest{}, func(context.Context, any) (any, error) {
		return nil, status.Error(codes.Unavailable, "backend unreachable")
	})
	// Output:
	// "level"=4 "msg"="call started" "method"="/csi.v1.Identity/Probe" "request_id"="req-1" "request"="{}"
	// "level"=0 "msg"="call finished" "method"="/csi.v1.Identity/Probe" "request_id"="req-1" "code"="Unavailable" "error"="backend unreachable"
}

// dropDuration removes the one attribute that changes from run to run.
func dropDuration(kv []any) []any {
	out := kv[:0:0]
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] != logging.KeyDuration {
			out = append(out, kv[i], kv[i+1])
		}
	}
	return out
}

// klog users pass klog's logr.Logger the same way; -v=4 shows Debug lines.
func ExampleUnaryServerInterceptor_klog() {
	logger := slog.New(logr.ToSlogHandler(klog.Background()))
	interceptor := logging.UnaryServerInterceptor(logger, logging.Options{})
	_ = grpc.NewServer(grpc.ChainUnaryInterceptor(requestid.UnaryServerInterceptor(), interceptor))
}

// oneRequest is the stream a handler gets: one request, sends counted.
type oneRequest struct {
	grpc.ServerStream
	req *csi.GetMetadataAllocatedRequest
}

func (oneRequest) Context() context.Context { return context.Background() }
func (s oneRequest) RecvMsg(m any) error {
	*m.(*csi.GetMetadataAllocatedRequest) = csi.GetMetadataAllocatedRequest{SnapshotId: s.req.GetSnapshotId(), Secrets: s.req.GetSecrets()}
	return nil
}
func (oneRequest) SendMsg(any) error { return nil }

func ExampleStreamServerInterceptor() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == logging.KeyDuration {
				return slog.Attr{} // keep the output stable
			}
			return a
		},
	}))
	interceptor := logging.StreamServerInterceptor(logger, logging.Options{
		// Every streaming call at Info, so this example prints a line.
		Level: func(string, codes.Code) slog.Level { return slog.LevelInfo },
	})
	// On a server: grpc.NewServer(grpc.ChainStreamInterceptor(..., interceptor, ...)).
	info := &grpc.StreamServerInfo{FullMethod: csi.SnapshotMetadata_GetMetadataAllocated_FullMethodName, IsServerStream: true}
	req := &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-1", Secrets: map[string]string{"token": "t0p-secret"}}
	_ = interceptor(nil, oneRequest{req: req}, info, func(_ any, ss grpc.ServerStream) error {
		var r csi.GetMetadataAllocatedRequest
		if err := ss.RecvMsg(&r); err != nil {
			return err
		}
		for range 2 {
			if err := ss.SendMsg(&csi.GetMetadataAllocatedResponse{}); err != nil {
				return err
			}
		}
		return nil
	})
	// Output:
	// level=INFO msg="call finished" method=/csi.v1.SnapshotMetadata/GetMetadataAllocated code=OK sent=2
}

package logging_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/logging"
	"github.com/csikit/csikit/csi/recovery"
	"github.com/csikit/csikit/csi/requestid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func benchInterceptor(b *testing.B, logger *slog.Logger, err error) {
	i := logging.UnaryServerInterceptor(logger, logging.Options{})
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Node/NodeStageVolume"}
	req := &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging", Secrets: map[string]string{"k": "v"}}
	resp := &csi.NodeStageVolumeResponse{}
	h := func(context.Context, any) (any, error) { return resp, err }
	ctx := requestid.NewContext(context.Background(), "req-1")
	b.ReportAllocs()
	for b.Loop() {
		i(ctx, req, info, h)
	}
}

// Successful call, logger at Info: nothing is written, nothing is built.
func BenchmarkInterceptorInfoOK(b *testing.B) {
	benchInterceptor(b, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
}

// Successful call into slog.DiscardHandler.
func BenchmarkInterceptorDiscardOK(b *testing.B) {
	benchInterceptor(b, slog.New(slog.DiscardHandler), nil)
}

// Failed call at Info: one line is formatted.
func BenchmarkInterceptorInfoError(b *testing.B) {
	benchInterceptor(b, slog.New(slog.NewTextHandler(io.Discard, nil)),
		status.Error(codes.FailedPrecondition, "volume is busy"))
}

// Successful call at Debug: two lines with stripped JSON bodies.
func BenchmarkInterceptorDebugOK(b *testing.B) {
	benchInterceptor(b, slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
}

// benchServer serves driver{} on a unix socket, bare or behind the chain,
// and returns a connected client.
func benchServer(b *testing.B, chain bool, logger *slog.Logger) *grpc.ClientConn {
	b.Helper()
	dir, err := os.MkdirTemp("", "bench")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "csi.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		b.Fatal(err)
	}
	var opts []grpc.ServerOption
	if chain {
		opts = append(opts, grpc.ChainUnaryInterceptor(
			requestid.UnaryServerInterceptor(),
			logging.UnaryServerInterceptor(logger, logging.Options{}),
			recovery.UnaryServerInterceptor(recovery.Options{Logger: logger}),
		))
	}
	srv := grpc.NewServer(opts...)
	csi.RegisterIdentityServer(srv, driver{})
	csi.RegisterControllerServer(srv, driver{})
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(); srv.Stop(); <-done; os.RemoveAll(dir) })
	return conn
}

var chains = []struct {
	name   string
	chain  bool
	logger func() *slog.Logger
}{
	{"bare", false, func() *slog.Logger { return nil }},
	{"chain-discard", true, func() *slog.Logger { return slog.New(slog.DiscardHandler) }},
	{"chain-info", true, func() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }},
}

// BenchmarkProbe: a Probe over a unix socket, bare grpc-go vs requestid +
// logging + recovery with the logger at Info.
func BenchmarkProbe(b *testing.B) {
	for _, c := range chains {
		b.Run(c.name, func(b *testing.B) {
			client := csi.NewIdentityClient(benchServer(b, c.chain, c.logger()))
			ctx := context.Background()
			req := &csi.ProbeRequest{}
			b.Run("seq", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := client.Probe(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("par", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := client.Probe(ctx, req); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}

// BenchmarkCreateVolume: a Controller RPC with secrets, same comparison.
func BenchmarkCreateVolume(b *testing.B) {
	for _, c := range chains {
		b.Run(c.name, func(b *testing.B) {
			client := csi.NewControllerClient(benchServer(b, c.chain, c.logger()))
			ctx := context.Background()
			req := &csi.CreateVolumeRequest{
				Name:               "pvc-0123456789",
				CapacityRange:      &csi.CapacityRange{RequiredBytes: 1 << 30},
				VolumeCapabilities: []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}}, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}},
				Parameters:         map[string]string{"pool": "fast"},
				Secrets:            map[string]string{"key": "hunter2"},
			}
			b.Run("seq", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := client.CreateVolume(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("par", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := client.CreateVolume(ctx, req); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		})
	}
}

// BenchmarkChainDirect: the three interceptors csikit chains (requestid,
// logging at Info, recovery) around a no-op handler, without a network:
// their whole cost per successful call.
func BenchmarkChainDirect(b *testing.B) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	rid := requestid.UnaryServerInterceptor()
	lg := logging.UnaryServerInterceptor(logger, logging.Options{})
	rec := recovery.UnaryServerInterceptor(recovery.Options{Logger: logger})
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Identity/Probe"}
	resp := &csi.ProbeResponse{}
	final := func(context.Context, any) (any, error) { return resp, nil }
	inner := func(ctx context.Context, req any) (any, error) { return rec(ctx, req, info, final) }
	middle := func(ctx context.Context, req any) (any, error) { return lg(ctx, req, info, inner) }
	ctx := context.Background()
	req := &csi.ProbeRequest{}
	b.ReportAllocs()
	for b.Loop() {
		rid(ctx, req, info, middle)
	}
}

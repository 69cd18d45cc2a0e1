package csikit_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csikit/csikit"
)

// bareServer is the baseline: the same services on a plain grpc-go server.
type bareServer struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	d *ctrlDriver
}

func (bareServer) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

func (b bareServer) CreateVolume(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return b.d.CreateVolume(ctx, r)
}

func bareConn(b *testing.B) *grpc.ClientConn {
	sock := filepath.Join(shortTempDir(b), "bare.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := grpc.NewServer()
	bs := bareServer{d: &ctrlDriver{}}
	csi.RegisterIdentityServer(srv, bs)
	csi.RegisterControllerServer(srv, bs)
	go srv.Serve(lis)
	b.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn
}

func csikitConn(b *testing.B) *grpc.ClientConn {
	// The full chain, logging at Info into a discard handler.
	logger := slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return serve(b, &ctrlDriver{}, csikit.Options{Logger: logger}).conn
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func benchProbe(b *testing.B, conn *grpc.ClientConn) {
	c := csi.NewIdentityClient(conn)
	ctx := context.Background()
	b.Run("seq", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Probe(ctx, &csi.ProbeRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Probe(ctx, &csi.ProbeRequest{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

func benchCreate(b *testing.B, conn *grpc.ClientConn) {
	c := csi.NewControllerClient(conn)
	ctx := context.Background()
	req := newCreate("bench")
	b.Run("seq", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.CreateVolume(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			// Distinct names per goroutine: the same name concurrently
			// would (rightly) answer Aborted.
			r := newCreate("bench-" + randName())
			for pb.Next() {
				if _, err := c.CreateVolume(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}

func BenchmarkProbe(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchProbe(b, bareConn(b)) })
	b.Run("csikit", func(b *testing.B) { benchProbe(b, csikitConn(b)) })
}

func BenchmarkCreateVolume(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchCreate(b, bareConn(b)) })
	b.Run("csikit", func(b *testing.B) { benchCreate(b, csikitConn(b)) })
}

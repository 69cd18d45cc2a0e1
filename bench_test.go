package csikit_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

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

// BenchmarkOverhead measures the full chain against the bare server in one
// run: five rounds, each timing b.N calls on the bare server and then b.N
// on csikit's, alternating so both see the same machine load. It reports
// the median wall ns/op, CPU ns/op (user+system of the whole process:
// client and server, as in-process) and mallocs/op of each, and the ratios
// (the bound: ≤ 1.10, csikit allocs ≤ bare + 6). On a loaded
// machine the wall ratio is noise; the CPU ratio is the cost.
func BenchmarkOverhead(b *testing.B) {
	b.Run("Probe", func(b *testing.B) {
		bare, ck := csi.NewIdentityClient(bareConn(b)), csi.NewIdentityClient(csikitConn(b))
		overhead(b, func(c csi.IdentityClient) error {
			_, err := c.Probe(context.Background(), &csi.ProbeRequest{})
			return err
		}, bare, ck)
	})
	b.Run("CreateVolume", func(b *testing.B) {
		bare, ck := csi.NewControllerClient(bareConn(b)), csi.NewControllerClient(csikitConn(b))
		req := newCreate("overhead")
		overhead(b, func(c csi.ControllerClient) error {
			_, err := c.CreateVolume(context.Background(), req)
			return err
		}, bare, ck)
	})
}

func overhead[C any](b *testing.B, call func(C) error, bare, ck C) {
	const rounds = 5
	// Warm both up (connections, caches).
	for range 200 {
		if call(bare) != nil || call(ck) != nil {
			b.Fatal("warm-up call failed")
		}
	}
	measure := func(c C) (nsPerOp, cpuPerOp, allocsPerOp float64) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start, cpu0 := time.Now(), cpuTime()
		for range b.N {
			if err := call(c); err != nil {
				b.Fatal(err)
			}
		}
		d, cpu := time.Since(start), cpuTime()-cpu0
		runtime.ReadMemStats(&m1)
		n := float64(b.N)
		return float64(d.Nanoseconds()) / n, float64(cpu.Nanoseconds()) / n, float64(m1.Mallocs-m0.Mallocs) / n
	}
	var bareNs, ckNs, bareCPU, ckCPU, bareAl, ckAl []float64
	b.ResetTimer()
	for r := range 2 * rounds {
		// Order A B B A …: neither side always goes first.
		if r%4 == 0 || r%4 == 3 {
			ns, cpu, al := measure(bare)
			bareNs, bareCPU, bareAl = append(bareNs, ns), append(bareCPU, cpu), append(bareAl, al)
		} else {
			ns, cpu, al := measure(ck)
			ckNs, ckCPU, ckAl = append(ckNs, ns), append(ckCPU, cpu), append(ckAl, al)
		}
	}
	b.StopTimer()
	bn, cn := median(bareNs), median(ckNs)
	b.ReportMetric(bn, "bare-ns/op")
	b.ReportMetric(cn, "csikit-ns/op")
	b.ReportMetric(cn/bn, "ratio")
	if bc, cc := median(bareCPU), median(ckCPU); bc > 0 {
		b.ReportMetric(bc, "bare-cpu-ns/op")
		b.ReportMetric(cc, "csikit-cpu-ns/op")
		b.ReportMetric(cc/bc, "cpu-ratio")
	}
	b.ReportMetric(median(bareAl), "bare-allocs/op")
	b.ReportMetric(median(ckAl), "csikit-allocs/op")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

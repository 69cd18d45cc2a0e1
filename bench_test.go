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
	"google.golang.org/grpc/status"
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

// bareConn serves bareServer on a plain grpc-go server. With logged, the
// server writes what a driver without csikit writes for its mutating
// calls: one Info line per CreateVolume, with its method, code and
// duration, through the same handler as csikitConn's.
func bareConn(b *testing.B, logged bool) *grpc.ClientConn {
	sock := filepath.Join(shortTempDir(b), "bare.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	var opts []grpc.ServerOption
	if logged {
		logger := benchLogger()
		opts = append(opts, grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			start := time.Now()
			resp, err := h(ctx, req)
			if info.FullMethod == csi.Controller_CreateVolume_FullMethodName {
				logger.LogAttrs(ctx, slog.LevelInfo, "call finished", slog.String("method", info.FullMethod),
					slog.String("code", status.Code(err).String()), slog.Duration("duration", time.Since(start)))
			}
			return resp, err
		}))
	}
	srv := grpc.NewServer(opts...)
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

// benchLogger logs at Info, as text, into nothing.
func benchLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(discard{}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func csikitConn(b *testing.B) *grpc.ClientConn {
	// The full chain, logging at Info into a discard handler.
	return serve(b, &ctrlDriver{}, csikit.Options{Logger: benchLogger()}).conn
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
	b.Run("bare", func(b *testing.B) { benchProbe(b, bareConn(b, false)) })
	b.Run("csikit", func(b *testing.B) { benchProbe(b, csikitConn(b)) })
}

func BenchmarkCreateVolume(b *testing.B) {
	b.Run("bare", func(b *testing.B) { benchCreate(b, bareConn(b, false)) })
	b.Run("csikit", func(b *testing.B) { benchCreate(b, csikitConn(b)) })
}

// BenchmarkOverhead measures the full chain against the bare server in one
// run. Each of its five rounds makes b.N timed calls on the bare server
// and b.N on csikit's, interleaved in blocks of overheadBlock calls (bare,
// csikit, csikit, bare, …), then up to 1000 more on each whose allocations
// it counts; interleaving lets both sides see the same machine: on a shared
// machine the speed of the whole process drifts by tens of percent within
// seconds, which a round of one side and then a round of the other turns
// into a ratio anywhere between 0.9 and 1.4. It reports each side's median
// (over the rounds) wall ns/op, CPU ns/op (user+system of the whole
// process: client and server, as in-process) and mallocs/op, and the
// ratios (the bound: ≤ 1.10, csikit allocs ≤ bare + 6). The
// "logged" case gives the bare server the Info line a driver without
// csikit writes for its CreateVolume calls (bareConn), so its ratio is the
// chain's cost net of that line; the "line" case times that logging bare
// server in csikit's place: the line's own cost. The "control" cases time
// a second bare server in csikit's place: their ratios, ideally 1, show
// the measurement's own error on this machine.
func BenchmarkOverhead(b *testing.B) {
	probe := func(c csi.IdentityClient) error {
		_, err := c.Probe(context.Background(), &csi.ProbeRequest{})
		return err
	}
	req := newCreate("overhead")
	create := func(c csi.ControllerClient) error {
		_, err := c.CreateVolume(context.Background(), req)
		return err
	}
	b.Run("Probe", func(b *testing.B) {
		overhead(b, probe, csi.NewIdentityClient(bareConn(b, false)), csi.NewIdentityClient(csikitConn(b)))
	})
	b.Run("CreateVolume", func(b *testing.B) {
		overhead(b, create, csi.NewControllerClient(bareConn(b, false)), csi.NewControllerClient(csikitConn(b)))
	})
	b.Run("CreateVolume/logged", func(b *testing.B) {
		overhead(b, create, csi.NewControllerClient(bareConn(b, true)), csi.NewControllerClient(csikitConn(b)))
	})
	b.Run("CreateVolume/line", func(b *testing.B) {
		overhead(b, create, csi.NewControllerClient(bareConn(b, false)), csi.NewControllerClient(bareConn(b, true)))
	})
	b.Run("Probe/control", func(b *testing.B) {
		overhead(b, probe, csi.NewIdentityClient(bareConn(b, false)), csi.NewIdentityClient(bareConn(b, false)))
	})
	b.Run("CreateVolume/control", func(b *testing.B) {
		overhead(b, create, csi.NewControllerClient(bareConn(b, false)), csi.NewControllerClient(bareConn(b, false)))
	})
}

// overheadBlock is how many calls BenchmarkOverhead makes on one side
// before switching: long enough that reading the clocks (a getrusage call
// per block) is noise, short enough that both sides share the machine's
// moods.
const overheadBlock = 50

func overhead[C any](b *testing.B, call func(C) error, bare, ck C) {
	const rounds = 5
	// Warm both up (connections, caches).
	for range 200 {
		if call(bare) != nil || call(ck) != nil {
			b.Fatal("warm-up call failed")
		}
	}
	type side struct {
		wall, cpu time.Duration
		mallocs   uint64
	}
	timed := func(c C, n int, s *side) {
		start, cpu0 := time.Now(), cpuTime()
		for range n {
			if err := call(c); err != nil {
				b.Fatal(err)
			}
		}
		s.wall += time.Since(start)
		s.cpu += cpuTime() - cpu0
	}
	// Allocations do not drift with the machine: counted per side in a
	// pass of their own (ReadMemStats stops the world; not per block).
	counted := func(c C, n int, s *side) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range n {
			if err := call(c); err != nil {
				b.Fatal(err)
			}
		}
		runtime.ReadMemStats(&m1)
		s.mallocs += m1.Mallocs - m0.Mallocs
	}
	var bareNs, ckNs, bareCPU, ckCPU, bareAl, ckAl []float64
	b.ResetTimer()
	for range rounds {
		var a, k side
		for i, done := 0, 0; done < b.N; i, done = i+1, done+overheadBlock {
			n := min(overheadBlock, b.N-done)
			if i%2 == 0 {
				timed(bare, n, &a)
				timed(ck, n, &k)
			} else {
				timed(ck, n, &k)
				timed(bare, n, &a)
			}
		}
		counted(bare, min(b.N, 1000), &a)
		counted(ck, min(b.N, 1000), &k)
		n, m := float64(b.N), float64(min(b.N, 1000))
		bareNs, ckNs = append(bareNs, float64(a.wall.Nanoseconds())/n), append(ckNs, float64(k.wall.Nanoseconds())/n)
		bareCPU, ckCPU = append(bareCPU, float64(a.cpu.Nanoseconds())/n), append(ckCPU, float64(k.cpu.Nanoseconds())/n)
		bareAl, ckAl = append(bareAl, float64(a.mallocs)/m), append(ckAl, float64(k.mallocs)/m)
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

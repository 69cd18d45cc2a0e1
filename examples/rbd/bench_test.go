//go:build linux

package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
)

// latencies collects per-operation durations and reports p50/p99.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	slices.Sort(l.d)
	if len(l.d) == 0 {
		return
	}
	pct := func(p float64) float64 { return float64(l.d[int(float64(len(l.d)-1)*p)].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// cpuMeter measures the CPU time a benchmark costs: this process's own
// (the driver, librbd and the gRPC clients all run in it), its waited-for
// children's (the rbd processes of the CLI benchmark), and the cluster
// daemons' (read from /proc through the PID files test/cluster.sh keeps
// next to the ceph.conf). On a machine whose cores are saturated,
// throughput follows CPU time per pair, which depends far less on what
// else the machine runs than pairs/s does (contention still inflates it
// somewhat), so compare the two sides on it too.
type cpuMeter struct {
	pidDir              string
	self, kids, cluster time.Duration
	clusterOK           bool
}

func rusage(who int) time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(who, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// clusterCPU sums utime+stime of the daemons whose PID files are in dir.
func clusterCPU(dir string) (time.Duration, bool) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
	if len(files) == 0 {
		return 0, false
	}
	var ticks int64
	for _, f := range files {
		pid, err := os.ReadFile(f)
		if err != nil {
			return 0, false
		}
		stat, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pid)), "stat"))
		if err != nil {
			return 0, false
		}
		// Fields after the command (which may hold spaces) in parentheses.
		rest := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(rest) < 13 {
			return 0, false
		}
		ut, err1 := strconv.ParseInt(rest[11], 10, 64)
		st, err2 := strconv.ParseInt(rest[12], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, false
		}
		ticks += ut + st
	}
	return time.Duration(ticks) * (time.Second / 100), true // USER_HZ is 100 on Linux
}

func startCPU(c cephtest.Cluster) *cpuMeter {
	m := &cpuMeter{pidDir: filepath.Join(filepath.Dir(c.Conf), "pids")}
	m.self, m.kids = rusage(syscall.RUSAGE_SELF), rusage(syscall.RUSAGE_CHILDREN)
	m.cluster, m.clusterOK = clusterCPU(m.pidDir)
	return m
}

// report adds cpu-ms/pair (this process and its children) and
// cluster-cpu-ms/pair (the daemons, when their PID files are readable).
func (m *cpuMeter) report(b *testing.B) {
	n := float64(b.N)
	own := rusage(syscall.RUSAGE_SELF) - m.self + rusage(syscall.RUSAGE_CHILDREN) - m.kids
	b.ReportMetric(float64(own.Microseconds())/1000/n, "cpu-ms/pair")
	if cl, ok := clusterCPU(m.pidDir); ok && m.clusterOK {
		b.ReportMetric(float64((cl-m.cluster).Microseconds())/1000/n, "cluster-cpu-ms/pair")
	}
}

// serve runs the driver through csikit on a unix socket and returns a
// controller client.
func serve(b *testing.B, c cephtest.Cluster) csi.ControllerClient {
	b.Helper()
	d, err := driver.New(driver.Options{Monitors: c.Monitors, DefaultPool: c.Pool, StateDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := csikit.NewServer(d.Service(), d.ServerOptions(csikit.Options{Name: "rbd.csikit.dev", Version: "v0.0.0-bench", NodeID: "bench"}))
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(b.TempDir(), "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.ListenAndServe(ctx, "unix://"+sock); close(done) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close(); cancel(); <-done; _ = d.Close() })
	ctrl := csi.NewControllerClient(conn)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("server never answered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return ctrl
}

// benchImage is the image both create/delete benchmarks make, so the two
// sides always do the same image work: CSIKIT_BENCH_SIZE_MIB (default 4)
// MiB with the features in CSIKIT_BENCH_FEATURES (default the driver's
// default, driver.DefaultImageFeatures; e.g. "layering").
type benchImage struct {
	sizeMiB  int64
	features string
}

func benchImageFromEnv(b *testing.B) benchImage {
	img := benchImage{sizeMiB: 4, features: driver.DefaultImageFeatures}
	if v := os.Getenv("CSIKIT_BENCH_SIZE_MIB"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			b.Fatalf("CSIKIT_BENCH_SIZE_MIB=%q: want a whole number of MiB", v)
		}
		img.sizeMiB = n
	}
	if v := os.Getenv("CSIKIT_BENCH_FEATURES"); v != "" {
		if strings.Trim(v, "abcdefghijklmnopqrstuvwxyz-,") != "" {
			b.Fatalf("CSIKIT_BENCH_FEATURES=%q: want a comma list of rbd image features", v)
		}
		img.features = v
	}
	return img
}

// request is the CreateVolume request of the driver side.
func (img benchImage) request(name string, c cephtest.Cluster) *csi.CreateVolumeRequest {
	r := createReq(name, c.Pool, c.Secrets())
	r.CapacityRange = &csi.CapacityRange{RequiredBytes: img.sizeMiB << 20}
	r.Parameters[driver.ParamImageFeatures] = img.features
	return r
}

// createArgs are the `rbd create` arguments of the CLI side.
func (img benchImage) createArgs(spec string) []string {
	return []string{"create", "--size", strconv.FormatInt(img.sizeMiB, 10) + "M", "--image-feature", img.features, spec}
}

// BenchmarkCreateDeleteVolume is CreateVolume + DeleteVolume of a volume
// (by default 4 MiB with the default features: see benchImage) through the whole stack,
// from 8 parallel clients: gRPC over a unix socket, csikit's interceptor
// chain, the omap journal (reserve and commit on create, look-up and
// release on delete: 8 RADOS ops), and librbd over the pooled connection
// (rbd_create, rbd_remove). Compare with BenchmarkCreateDeleteCLI, which
// does the same image work and no journal.
func BenchmarkCreateDeleteVolume(b *testing.B) {
	c := cephtest.Require(b)
	img := benchImageFromEnv(b)
	ctrl := serve(b, c)
	var lat latencies
	var n atomic.Int64
	prefix := journal.RandomID("")[:8]
	b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0))) // 8 clients
	b.ResetTimer()
	cpu := startCPU(c)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			start := time.Now()
			resp, err := ctrl.CreateVolume(ctx, img.request(fmt.Sprintf("bench-%s-%d", prefix, n.Add(1)), c))
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: c.Secrets()}); err != nil {
				b.Error(err)
				return
			}
			lat.add(time.Since(start))
		}
	})
	b.StopTimer()
	cpu.report(b)
	lat.report(b)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkCreateDeleteCLI is the same create + delete done the way
// drivers that shell out do it: one `rbd create --size 4M
// --image-feature <driver.DefaultImageFeatures>` (the benchImage) and one
// `rbd rm` process per call, 8 clients in parallel, in the same pool, as
// the same Ceph user. The image work is the driver's (same size, same
// features, passed explicitly rather than left to the CLI's own default);
// the key is passed with --key and the monitor's config is not fetched
// (--no-mon-config), the cheapest way to run the tool; no journal.
func BenchmarkCreateDeleteCLI(b *testing.B) {
	c := cephtest.Require(b)
	if _, err := exec.LookPath("rbd"); err != nil {
		cephtest.Skipf(b, "needs the rbd CLI (ceph-common)")
	}
	args := []string{"-m", c.Monitors, "--id", c.User, "--key", c.Key, "--no-mon-config"}
	img := benchImageFromEnv(b)
	var lat latencies
	var n atomic.Int64
	prefix := journal.RandomID("")[:8]
	b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0))) // 8 clients
	b.ResetTimer()
	cpu := startCPU(c)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			spec := fmt.Sprintf("%s/cli-%s-%d", c.Pool, prefix, n.Add(1))
			start := time.Now()
			if out, err := exec.Command("rbd", append(slices.Clip(args), img.createArgs(spec)...)...).CombinedOutput(); err != nil {
				b.Errorf("rbd create: %v: %s", err, out)
				return
			}
			if out, err := exec.Command("rbd", append(slices.Clip(args), "rm", "--no-progress", spec)...).CombinedOutput(); err != nil {
				b.Errorf("rbd rm: %v: %s", err, out)
				return
			}
			lat.add(time.Since(start))
		}
	})
	b.StopTimer()
	cpu.report(b)
	lat.report(b)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
}

// BenchmarkJournalReserveCommit is one journal reservation and its commit
// on the cluster's omap objects, sequential and with 8 parallel callers.
func BenchmarkJournalReserveCommit(b *testing.B) {
	c := cephtest.Require(b)
	for _, par := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", par), func(b *testing.B) {
			pool := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
			defer pool.Close()
			j := driver.NewOmapJournal(pool, driver.Credentials{User: c.User, Key: c.Key}, c.Pool)
			var lat latencies
			var n atomic.Int64
			prefix := journal.RandomID("")[:8]
			var ids sync.Map
			b.SetParallelism(max(1, par/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					name, id := fmt.Sprintf("jb-%s-%d", prefix, n.Add(1)), journal.RandomID("")
					start := time.Now()
					if _, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: name, ID: id, Fingerprint: []byte("fp")}); err != nil {
						b.Error(err)
						return
					}
					if err := j.Commit(ctx, journal.KindVolume, name, id, []byte("response")); err != nil {
						b.Error(err)
						return
					}
					lat.add(time.Since(start))
					ids.Store(id, true)
				}
			})
			b.StopTimer()
			lat.report(b)
			ids.Range(func(k, _ any) bool {
				_ = j.Release(context.Background(), journal.KindVolume, k.(string))
				return true
			})
		})
	}
}

//go:build linux

package driver_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/hostpath/driver"
)

// scaleServer is one run of the driver on a unix socket.
type scaleServer struct {
	d      *driver.Driver
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan error
}

// startScale opens the driver on state and serves it, returning once a
// Probe from the client answers ready.
func startScale(tb testing.TB, state, sock string) *scaleServer {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d, err := driver.New(ctx, driver.Options{StateDir: state, NodeID: "scale"})
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := csikit.NewServer(d, csikit.Options{
		Disable: driver.Options{}.Disabled(),
		Name:    "hostpath.csikit.dev", Version: "scale", NodeID: "scale",
		VolumeModes: csikit.Mount | csikit.Block, AccessModes: driver.AccessModes(),
		Alpha: true, Journal: d.Journal(),
	})
	if err != nil {
		tb.Fatal(err)
	}
	os.Remove(sock)
	s := &scaleServer{d: d, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.ListenAndServe(ctx, "unix://"+sock) }()
	// Connect once the socket answers: a gRPC client that tried too early
	// backs off for seconds, which would be timed as the restart.
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		time.Sleep(time.Millisecond)
	}
	s.conn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	id := csi.NewIdentityClient(s.conn)
	for {
		r, err := id.Probe(ctx, &csi.ProbeRequest{})
		if err == nil && (r.GetReady() == nil || r.GetReady().GetValue()) {
			return s
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *scaleServer) stop() {
	s.conn.Close()
	s.cancel()
	<-s.done
	s.d.Close()
}

// BenchmarkScale creates HOSTPATH_SCALE volumes (default 2,000; directory
// kind, the journal alone) with 8 clients and reports what issue 32 asks
// of a large fleet: the create latency per tenth of the run (p50 of the
// first and the last), the time from a restart to Probe ready, the
// process's RSS and live heap, ListVolumes per page of 500 at several
// offsets, and NodeGetVolumeStats. b.N is ignored past the first run
// (run it with -benchtime=1x). The figures go to the log and as metrics;
// HOSTPATH_SCALE_HEAP=file writes a heap profile where memory is measured.
//
//	HOSTPATH_SCALE=100000 go test -run '^$' -bench Scale -benchtime=1x ./examples/hostpath/driver
func BenchmarkScale(b *testing.B) {
	if os.Geteuid() != 0 {
		csitest.Skip(b, "needs root: the driver mounts")
	}
	n := 2000
	if s := os.Getenv("HOSTPATH_SCALE"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 10 {
			b.Fatalf("HOSTPATH_SCALE=%q: want a number ≥ 10", s)
		}
	}
	dir := b.TempDir()
	if d := os.Getenv("HOSTPATH_SCALE_DIR"); d != "" {
		dir = d // kept, to inspect or to rerun the list and restart part
	}
	state, sock := filepath.Join(dir, "state"), filepath.Join(dir, "csi.sock")
	s := startScale(b, state, sock)
	ctx := context.Background()
	c := csi.NewControllerClient(s.conn)

	// Creates, 8 clients, latency by the tenth of the run it fell in.
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t := time.Now()
				_, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: fmt.Sprintf("scale-%07d", i),
					CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}, VolumeCapabilities: []*csi.VolumeCapability{mountCapability()}})
				if err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	total := time.Since(t0)
	var tenths []string
	var p50s []time.Duration
	for t := range 10 {
		part := slices.Clone(lat[t*n/10 : (t+1)*n/10])
		slices.Sort(part)
		p50s = append(p50s, part[len(part)/2])
		tenths = append(tenths, fmt.Sprintf("%.2f", float64(part[len(part)/2].Microseconds())/1000))
	}
	b.Logf("create: %d volumes in %s (%.0f/s); p50 ms per tenth: %s", n, total.Round(time.Millisecond), float64(n)/total.Seconds(), strings.Join(tenths, " "))
	b.ReportMetric(float64(n)/total.Seconds(), "creates/s")
	b.ReportMetric(float64(p50s[9])/float64(p50s[0]), "last/first-p50")

	// Restart to ready.
	s.stop()
	t0 = time.Now()
	s = startScale(b, state, sock)
	restart := time.Since(t0)
	b.Logf("restart to Probe ready: %s", restart.Round(time.Millisecond))
	b.ReportMetric(restart.Seconds()*1000, "restart-ms")
	defer s.stop()
	c = csi.NewControllerClient(s.conn)

	// ListVolumes pages of 500 at several offsets, walking the whole list.
	var pageTimes []time.Duration
	tok, listed := "", 0
	for {
		t := time.Now()
		r, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 500, StartingToken: tok})
		if err != nil {
			b.Fatal(err)
		}
		pageTimes = append(pageTimes, time.Since(t))
		listed += len(r.GetEntries())
		if tok = r.GetNextToken(); tok == "" {
			break
		}
	}
	if listed != n {
		b.Errorf("listed %d volumes, created %d", listed, n)
	}
	var at []string
	worst := time.Duration(0)
	for i, t := range pageTimes {
		worst = max(worst, t)
		if k := len(pageTimes); i == 0 || i == k/4 || i == k/2 || i == 3*k/4 || i == k-1 {
			at = append(at, fmt.Sprintf("@%d %.2fms", i*500, float64(t.Microseconds())/1000))
		}
	}
	b.Logf("ListVolumes, page of 500: %s; worst %.2fms", strings.Join(at, ", "), float64(worst.Microseconds())/1000)
	b.ReportMetric(float64(worst.Microseconds())/1000, "list-worst-ms/page")

	// Memory once the fleet is loaded and listed.
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss := vmRSS()
	if path := os.Getenv("HOSTPATH_SCALE_HEAP"); path != "" {
		// What is held per volume: go tool pprof -sample_index=inuse_space.
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	b.Logf("memory: RSS %d MB, live heap %d MB (%d B per volume)", rss>>20, ms.HeapAlloc>>20, ms.HeapAlloc/uint64(n))
	b.ReportMetric(float64(rss>>20), "rss-MB")
	b.ReportMetric(float64(ms.HeapAlloc)/float64(n), "heap-B/volume")

	// NodeGetVolumeStats of one staged and published volume.
	nc := csi.NewNodeClient(s.conn)
	r, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 1})
	if err != nil {
		b.Fatal(err)
	}
	id := r.GetEntries()[0].GetVolume().GetVolumeId()
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "target")
	if _, err := nc.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCapability()}); err != nil {
		b.Fatal(err)
	}
	if _, err := nc.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCapability()}); err != nil {
		b.Fatal(err)
	}
	defer nc.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
	defer nc.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
	stats := make([]time.Duration, 2000)
	for i := range stats {
		t := time.Now()
		if _, err := nc.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target}); err != nil {
			b.Fatal(err)
		}
		stats[i] = time.Since(t)
	}
	slices.Sort(stats)
	b.Logf("NodeGetVolumeStats: p50 %s p99 %s", stats[len(stats)/2], stats[len(stats)*99/100])
	b.ReportMetric(float64(stats[len(stats)/2].Microseconds()), "stats-p50-µs")
}

// vmRSS is the process's resident set in bytes.
func vmRSS() uint64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

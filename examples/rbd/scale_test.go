//go:build linux

package main_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
)

// fleetSize is how many volumes BenchmarkVolumeFleet keeps in the pool:
// CSIKIT_BENCH_VOLUMES, default 200 (CI runs every benchmark once); the
// figures for issue 32 come from 10000.
func fleetSize(b *testing.B) int {
	if v := os.Getenv("CSIKIT_BENCH_VOLUMES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("CSIKIT_BENCH_VOLUMES=%q: want a positive count", v)
		}
		return n
	}
	return 200
}

// startFleetDriver starts a driver on the cluster, served through csikit,
// and returns it, its clients and how long it took until Probe answered.
func startFleetDriver(b *testing.B, c cephtest.Cluster) (*driver.Driver, *csitest.Server, time.Duration) {
	b.Helper()
	began := time.Now()
	d, err := driver.New(driver.Options{Monitors: c.Monitors, DefaultPool: c.Pool, StateDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	s, err := csitest.Start(d.Service(), d.ServerOptions(csikit.Options{Name: "rbd.csikit.dev", Version: "v0.0.0-bench", NodeID: "bench"}))
	if err != nil {
		_ = d.Close()
		b.Fatal(err)
	}
	if _, err := s.Identity.Probe(context.Background(), &csi.ProbeRequest{}); err != nil {
		b.Fatal(err)
	}
	return d, s, time.Since(began)
}

// BenchmarkVolumeFleet measures the rbd driver with a fleet of
// CSIKIT_BENCH_VOLUMES volumes (created by 8 clients, or found again:
// names are fixed, CreateVolume is idempotent; CSIKIT_BENCH_KEEP_FLEET=1
// keeps them for the next run) in the omap journal and the pool: a
// restart until Probe answers (startup-ms), ListVolumes pages of 500 from
// the first to the last (first-, mid-, last- and p50-page-ms), and the
// hourly sweep of abandoned creates over the whole journal (sweep-ms),
// once per iteration.
func BenchmarkVolumeFleet(b *testing.B) {
	c := cephtest.Require(b)
	n := fleetSize(b)
	_, s, _ := startFleetDriver(b, c)
	ctx := context.Background()
	vc := []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	began := time.Now()
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				resp, err := s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: fmt.Sprintf("fleet-%06d", i),
					VolumeCapabilities: vc, Secrets: c.Secrets(), CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20}})
				if err != nil {
					b.Error(err)
					return
				}
				ids[i] = resp.GetVolume().GetVolumeId()
			}
		}()
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	b.Logf("%d volumes created or found in %v", n, time.Since(began).Round(time.Millisecond))
	if os.Getenv("CSIKIT_BENCH_KEEP_FLEET") != "1" {
		b.Cleanup(func() {
			var next atomic.Int64
			var wg sync.WaitGroup
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
						if _, err := s.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: ids[i], Secrets: c.Secrets()}); err != nil {
							b.Error(err)
						}
					}
				}()
			}
			wg.Wait()
		})
	}
	var startup, sweep, first, mid, last, pages []time.Duration
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		d, s, took := startFleetDriver(b, c)
		startup = append(startup, took)
		// ListVolumes and the sweep carry no secrets: a call that does
		// tells the restarted driver the pool and its credentials.
		if _, err := s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "fleet-000000", VolumeCapabilities: vc,
			Secrets: c.Secrets(), CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20}}); err != nil {
			b.Fatal(err)
		}
		var walk []time.Duration
		seen, tok := 0, ""
		for {
			t0 := time.Now()
			resp, err := s.Controller.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 500, StartingToken: tok})
			if err != nil {
				b.Fatal(err)
			}
			walk = append(walk, time.Since(t0))
			seen += len(resp.GetEntries())
			if tok = resp.GetNextToken(); tok == "" {
				break
			}
		}
		if seen < n {
			b.Fatalf("ListVolumes walked %d volumes; the fleet has %d", seen, n)
		}
		first, mid, last = append(first, walk[0]), append(mid, walk[len(walk)/2]), append(last, walk[len(walk)-1])
		pages = append(pages, walk...)
		t0 := time.Now()
		if _, err := d.SweepAbandoned(ctx, journal.KindVolume, 24*time.Hour); err != nil {
			b.Fatal(err)
		}
		sweep = append(sweep, time.Since(t0))
		_ = s.Close()
		_ = d.Close()
	}
	b.StopTimer()
	ms := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	b.ReportMetric(float64(n), "volumes")
	b.ReportMetric(ms(startup), "startup-ms")
	b.ReportMetric(ms(first), "first-page-ms")
	b.ReportMetric(ms(mid), "mid-page-ms")
	b.ReportMetric(ms(last), "last-page-ms")
	b.ReportMetric(ms(pages), "p50-page-ms")
	b.ReportMetric(ms(sweep), "sweep-ms")
}

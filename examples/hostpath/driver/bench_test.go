//go:build linux

package driver_test

import (
	"context"
	"fmt"
	"github.com/csikit/csikit/csitest"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/hostpath/driver"
)

// benchDriver serves the hostpath driver in-process through csikit on a
// real unix socket, as main does, and returns a client connection.
func benchDriver(b *testing.B) (*grpc.ClientConn, string) {
	b.Helper()
	if os.Geteuid() != 0 {
		csitest.Skip(b, "needs root: the driver mounts")
	}
	dir, err := os.MkdirTemp("", "hpb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	ctx, cancel := context.WithCancel(context.Background())
	d, err := driver.New(ctx, driver.Options{StateDir: filepath.Join(dir, "state"), NodeID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := csikit.NewServer(d, csikit.Options{
		Disable: driver.Options{}.Disabled(), // neither attach nor modify
		Name:    "hostpath.csikit.dev", Version: "bench", NodeID: "bench",
		VolumeModes: csikit.Mount | csikit.Block, AccessModes: driver.AccessModes(),
		Alpha: true, Journal: d.Journal(),
	})
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "csi.sock")
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx, "unix://"+sock) }()
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		conn.Close()
		cancel()
		<-done
		d.Close()
	})
	return conn, dir
}

func mountCapability() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

// eightClients runs 8 goroutines whatever GOMAXPROCS is.
func eightClients(b *testing.B) {
	b.SetParallelism((8 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
}

// BenchmarkCreateDelete is one durable CreateVolume + DeleteVolume cycle
// (journal reservation, commit and release, metadata write and delete,
// each fsynced) with 8 parallel clients. cpu-ns/op is the process's CPU
// (driver and clients) per cycle: on a shared machine cycles/s follows
// the load, the CPU a cycle takes much less.
func BenchmarkCreateDelete(b *testing.B) {
	conn, _ := benchDriver(b)
	c := csi.NewControllerClient(conn)
	var seq atomic.Int64
	eightClients(b)
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			name := fmt.Sprintf("bench-%d", seq.Add(1))
			resp, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name,
				CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}, VolumeCapabilities: []*csi.VolumeCapability{mountCapability()}})
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := c.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId()}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}

// BenchmarkPublishCycle is NodeStage + NodePublish + NodeUnpublish +
// NodeUnstage of a directory volume with 8 parallel clients, each on its
// own volume.
func BenchmarkPublishCycle(b *testing.B) {
	conn, dir := benchDriver(b)
	c, n := csi.NewControllerClient(conn), csi.NewNodeClient(conn)
	var seq atomic.Int64
	eightClients(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		k := seq.Add(1)
		resp, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: fmt.Sprintf("pub-%d", k),
			CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}, VolumeCapabilities: []*csi.VolumeCapability{mountCapability()}})
		if err != nil {
			b.Error(err)
			return
		}
		id := resp.GetVolume().GetVolumeId()
		staging := filepath.Join(dir, "staging", id)
		target := filepath.Join(dir, "pods", id, "mount")
		for pb.Next() {
			if _, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCapability()}); err != nil {
				b.Error(err)
				return
			}
			if _, err := n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCapability()}); err != nil {
				b.Error(err)
				return
			}
			if _, err := n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
				b.Error(err)
				return
			}
			if _, err := n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
}

// BenchmarkNodeGetVolumeStats measures stats of a published volume with 8
// parallel clients and reports the median latency.
func BenchmarkNodeGetVolumeStats(b *testing.B) {
	conn, dir := benchDriver(b)
	c, n := csi.NewControllerClient(conn), csi.NewNodeClient(conn)
	ctx := context.Background()
	resp, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "stats",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}, VolumeCapabilities: []*csi.VolumeCapability{mountCapability()}})
	if err != nil {
		b.Fatal(err)
	}
	id := resp.GetVolume().GetVolumeId()
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "target")
	if _, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: mountCapability()}); err != nil {
		b.Fatal(err)
	}
	if _, err := n.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: mountCapability()}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		n.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target})
		n.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging})
	})
	var mu sync.Mutex
	var lat []time.Duration
	eightClients(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			if _, err := n.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target}); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	}
}

// BenchmarkListVolumes is one ListVolumes page of 500 from a driver of
// 3,000 volumes, at starts spread over the list (the token of the volume
// before). cpu-ns/op is the process's CPU (driver and client) per page.
func BenchmarkListVolumes(b *testing.B) {
	conn, _ := benchDriver(b)
	c := csi.NewControllerClient(conn)
	ctx := context.Background()
	const n = 3000
	var sem sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		sem.Add(1)
		go func() {
			defer sem.Done()
			for i := w; i < n; i += 8 {
				if _, err := c.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: fmt.Sprintf("list-%d", i),
					CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}, VolumeCapabilities: []*csi.VolumeCapability{mountCapability()}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	sem.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	// The tokens of pages starting every 100 volumes.
	var toks []string
	for tok := ""; ; {
		r, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 100, StartingToken: tok})
		if err != nil {
			b.Fatal(err)
		}
		toks = append(toks, tok)
		if tok = r.GetNextToken(); tok == "" {
			break
		}
	}
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	i := 0
	b.ResetTimer()
	for b.Loop() {
		r, err := c.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 500, StartingToken: toks[i%len(toks)]})
		if err != nil || len(r.GetEntries()) == 0 {
			b.Fatal(err)
		}
		i += 7
	}
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}

package csikit_test

import (
	"context"
	"errors"
	"io"
	"math"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/internal/testenv"
)

// bulkDriver reports n FIXED_LENGTH ranges of 4 KiB spread over a 2^60
// byte volume (offsets of 8 varint bytes, the encoding's worst case short
// of 2^63). It samples the live heap every 16384 ranges and, after gate ranges,
// waits until the test says the client has received a message (or gives
// up after 10 s, which the test reports).
type bulkDriver struct {
	ctrlDriver
	n        int64
	gate     int64
	received chan struct{}
	waited   atomic.Bool // the driver gave up waiting for the first message
	sample   bool
	base     uint64
	peak     atomic.Uint64
}

const bulkCapacity = 1 << 60

func (d *bulkDriver) GetMetadataAllocated(ctx context.Context, _ *csi.GetMetadataAllocatedRequest, w *csikit.BlockMetadataStream) error {
	if err := w.Begin(csi.BlockMetadataType_FIXED_LENGTH, bulkCapacity); err != nil {
		return err
	}
	step := int64(bulkCapacity / d.n)
	for i := range d.n {
		if err := w.Add(i*step, 4096); err != nil {
			return err
		}
		if d.sample && i%16384 == 0 {
			runtime.GC() // live heap only, not garbage awaiting collection
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > d.peak.Load() {
				d.peak.Store(ms.HeapAlloc)
			}
		}
		if i == d.gate && d.received != nil {
			select {
			case <-d.received:
			case <-time.After(10 * time.Second):
				d.waited.Store(true)
			}
		}
	}
	return nil
}

func (d *bulkDriver) GetMetadataDelta(context.Context, *csi.GetMetadataDeltaRequest, *csikit.BlockMetadataStream) error {
	return status.Error(codes.FailedPrecondition, "no change tracking")
}

// TestSnapshotMetadataMillionRanges: a million ranges asked for with a
// max_results of 2^20 reach a client with gRPC's default 4 MiB receive
// limit in messages under that limit, the first one while the driver is
// still producing, with the server's heap growing by a bounded amount
// rather than by the whole result (87 MiB when it was buffered).
func TestSnapshotMetadataMillionRanges(t *testing.T) {
	const n = 1 << 20
	d := &bulkDriver{n: n, gate: 3 * csikit.MaxBlockMetadataPerMessage / 2, received: make(chan struct{}), sample: true}
	s := serve(t, d, csikit.Options{Alpha: true})
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	d.base = ms.HeapAlloc
	d.peak.Store(ms.HeapAlloc)

	st, err := csi.NewSnapshotMetadataClient(s.conn).GetMetadataAllocated(context.Background(),
		&csi.GetMetadataAllocatedRequest{SnapshotId: "snap", MaxResults: n})
	if err != nil {
		t.Fatal(err)
	}
	total, msgs, largest := 0, 0, 0
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d messages (%d ranges): %v", msgs, total, err)
		}
		if msgs == 0 {
			close(d.received)
		}
		msgs++
		total += len(m.GetBlockMetadata())
		largest = max(largest, proto.Size(m))
		if len(m.GetBlockMetadata()) > csikit.MaxBlockMetadataPerMessage {
			t.Errorf("message of %d ranges, over MaxBlockMetadataPerMessage", len(m.GetBlockMetadata()))
		}
	}
	if total != n {
		t.Errorf("received %d ranges, want %d", total, n)
	}
	if largest >= 4<<20 {
		t.Errorf("largest message %d bytes, not under 4 MiB", largest)
	}
	if d.waited.Load() {
		t.Errorf("no message reached the client while the driver was producing (%d ranges were pending)", d.gate)
	}
	growth := int64(d.peak.Load()) - int64(d.base)
	t.Logf("%d messages, largest %d bytes, heap growth %.1f MiB", msgs, largest, float64(growth)/(1<<20))
	if growth > 40<<20 {
		t.Errorf("heap grew by %.1f MiB while streaming %d ranges, want a bounded amount (two batches)", float64(growth)/(1<<20), n)
	}
}

// TestSnapshotMetadataHugeMaxResults: max_results = 2^31-1 is allowed, but
// allocates only what is sent (it allocated a slice of 16 GiB per call).
func TestSnapshotMetadataHugeMaxResults(t *testing.T) {
	d := newMetaDriver()
	s := serve(t, d, csikit.Options{Alpha: true})
	c := csi.NewSnapshotMetadataClient(s.conn)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ms, err := readAllocated(t, c, &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-a", MaxResults: math.MaxInt32})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got := flatten(ms); len(got) != 4 || len(ms) != 1 {
		t.Errorf("messages %v, want the 4 ranges in one", sizes(ms))
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 16<<20 {
		t.Errorf("one call allocated %d MiB for 4 ranges", grown>>20)
	}
}

// TestSnapshotMetadataStalledClient: a client that stops reading holds
// the snapshot's lock only for Options.MetadataSendTimeout: then the call
// ends with DeadlineExceeded, the driver's context is cancelled and
// DeleteSnapshot succeeds (it answered Aborted until the client went
// away).
func TestSnapshotMetadataStalledClient(t *testing.T) {
	d := newMetaDriver()
	d.endless = true
	d.ranges["snap-long"] = nil
	d.started = make(chan struct{})
	logs := &testenv.SyncBuffer{}
	s := serve(t, d, csikit.Options{Alpha: true, MetadataSendTimeout: 500 * time.Millisecond, Logger: debugLogger(logs)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := csi.NewSnapshotMetadataClient(s.conn).GetMetadataAllocated(ctx,
		&csi.GetMetadataAllocatedRequest{SnapshotId: "snap-long"}); err != nil {
		t.Fatal(err)
	}
	<-d.started // the call holds the lock; the client reads nothing
	_, err := s.controller().DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: "snap-long"})
	testenv.WantCode(t, err, codes.Aborted)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := s.controller().DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: "snap-long"})
		if err == nil {
			break
		}
		if status.Code(err) != codes.Aborted || time.Now().After(deadline) {
			t.Fatalf("DeleteSnapshot while a client stopped reading: %v (30 s after the stream stalled)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The driver's loop ended (its context was cancelled): no more ranges.
	n := d.added.Load()
	time.Sleep(200 * time.Millisecond)
	if d.added.Load() != n {
		t.Error("the driver still produces after the call ended")
	}
	// The goroutine that was blocked sending ends too (gRPC closed the
	// stream behind the handler): nothing leaks per stalled client.
	for {
		var b strings.Builder
		if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "metadataPump") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sending goroutine is still running:\n%s", b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for !strings.Contains(logs.String(), `"code":"DeadlineExceeded"`) {
		if time.Now().After(deadline) {
			t.Fatalf("no DeadlineExceeded call line:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkSnapshotMetadataStream: one call streaming 2^16 ranges in
// messages of the default 1024, client and server in process over a unix
// socket (go test -run XXX -bench SnapshotMetadataStream .).
func BenchmarkSnapshotMetadataStream(b *testing.B) {
	const n = 1 << 16
	s := serve(b, &bulkDriver{n: n}, csikit.Options{Alpha: true})
	c := csi.NewSnapshotMetadataClient(s.conn)
	b.ReportAllocs()
	for b.Loop() {
		st, err := c.GetMetadataAllocated(context.Background(), &csi.GetMetadataAllocatedRequest{SnapshotId: "snap"})
		if err != nil {
			b.Fatal(err)
		}
		total := 0
		for {
			m, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			total += len(m.GetBlockMetadata())
		}
		if total != n {
			b.Fatalf("%d ranges, want %d", total, n)
		}
	}
}

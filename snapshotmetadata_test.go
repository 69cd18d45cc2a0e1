package csikit_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/internal/testenv"
)

// metaDriver is a controller with snapshots whose metadata is a fixed
// list of ranges per snapshot on a 1 MiB volume.
type metaDriver struct {
	ctrlDriver
	ranges  map[string][][2]int64
	added   atomic.Int64
	release chan struct{} // when set, calls wait for it after Begin
	started chan struct{}
	endless bool // report 4 KiB ranges of a 1 PiB volume until the client goes away
}

const metaCapacity = 1 << 20

func (d *metaDriver) report(ctx context.Context, id string, w *csikit.BlockMetadataStream) error {
	rs, ok := d.ranges[id]
	if !ok {
		return status.Errorf(codes.NotFound, "snapshot %s not found", id)
	}
	capacity := int64(metaCapacity)
	if d.endless {
		capacity = 1 << 50
	}
	if err := w.Begin(csi.BlockMetadataType_VARIABLE_LENGTH, capacity); err != nil {
		return err
	}
	if d.started != nil {
		close(d.started)
	}
	if d.release != nil {
		<-d.release
	}
	if d.endless {
		for off := int64(0); off < capacity; off += 8192 {
			if err := w.Add(off, 4096); err != nil {
				return err
			}
			d.added.Add(1)
		}
		return nil
	}
	for _, r := range rs {
		if err := w.Add(r[0], r[1]); err != nil {
			return err
		}
		d.added.Add(1)
	}
	return nil
}

func (d *metaDriver) GetMetadataAllocated(ctx context.Context, r *csi.GetMetadataAllocatedRequest, w *csikit.BlockMetadataStream) error {
	return d.report(ctx, r.GetSnapshotId(), w)
}

func (d *metaDriver) GetMetadataDelta(ctx context.Context, r *csi.GetMetadataDeltaRequest, w *csikit.BlockMetadataStream) error {
	if _, ok := d.ranges[r.GetBaseSnapshotId()]; !ok {
		return status.Errorf(codes.NotFound, "snapshot %s not found", r.GetBaseSnapshotId())
	}
	return d.report(ctx, r.GetTargetSnapshotId(), w)
}

func newMetaDriver() *metaDriver {
	return &metaDriver{ranges: map[string][][2]int64{
		"snap-a":   {{0, 4096}, {8192, 4096}, {65536, 131072}, {1<<20 - 4096, 4096}},
		"snap-bad": {{8192, 4096}, {0, 4096}}, // unsorted: a driver bug
		"snap-big": {{0, 8192}, {1 << 20, 4096}},
	}}
}

// readAllocated returns the messages of one GetMetadataAllocated call.
func readAllocated(t *testing.T, c csi.SnapshotMetadataClient, req *csi.GetMetadataAllocatedRequest) ([]*csi.GetMetadataAllocatedResponse, error) {
	t.Helper()
	st, err := c.GetMetadataAllocated(context.Background(), req)
	if err != nil {
		return nil, err
	}
	var out []*csi.GetMetadataAllocatedResponse
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

func flatten(ms []*csi.GetMetadataAllocatedResponse) [][2]int64 {
	var out [][2]int64
	for _, m := range ms {
		for _, b := range m.GetBlockMetadata() {
			out = append(out, [2]int64{b.GetByteOffset(), b.GetSizeBytes()})
		}
	}
	return out
}

func TestSnapshotMetadataServed(t *testing.T) {
	d := newMetaDriver()
	logs := &testenv.SyncBuffer{}
	s := serve(t, d, csikit.Options{Alpha: true, Logger: debugLogger(logs)})
	caps, err := s.identity().GetPluginCapabilities(context.Background(), &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range caps.GetCapabilities() {
		found = found || c.GetService().GetType() == csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE
	}
	if !found {
		t.Errorf("SNAPSHOT_METADATA_SERVICE not advertised: %v", caps)
	}
	c := csi.NewSnapshotMetadataClient(s.conn)

	const secret = "meta-s3cret-\"q\"\n"
	ms, err := readAllocated(t, c, &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-a", MaxResults: 3, Secrets: map[string]string{"k": secret}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || len(ms[0].GetBlockMetadata()) != 3 || len(ms[1].GetBlockMetadata()) != 1 {
		t.Errorf("max_results 3 over 4 ranges: messages of %v, want 3 then 1", sizes(ms))
	}
	for _, m := range ms {
		if m.GetVolumeCapacityBytes() != metaCapacity || m.GetBlockMetadataType() != csi.BlockMetadataType_VARIABLE_LENGTH {
			t.Errorf("message without capacity or type: %v", m)
		}
	}
	if got := flatten(ms); len(got) != 4 || got[3] != [2]int64{1<<20 - 4096, 4096} {
		t.Errorf("ranges %v", got)
	}
	// starting_offset: ranges that end at or before it are dropped; the
	// one containing it is kept.
	ms, err = readAllocated(t, c, &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-a", StartingOffset: 12288 + 100*1024})
	if err != nil {
		t.Fatal(err)
	}
	if got := flatten(ms); len(got) != 2 || got[0][0] != 65536 {
		t.Errorf("from offset %d: %v, want the range at 65536 and the last", 12288+100*1024, got)
	}
	if strings.Contains(logs.String(), "meta-s3cret") {
		t.Errorf("secret logged:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"method":"/csi.v1.SnapshotMetadata/GetMetadataAllocated"`) {
		t.Errorf("streaming call not logged:\n%s", logs.String())
	}

	for _, tc := range []struct {
		name string
		req  *csi.GetMetadataAllocatedRequest
		code codes.Code
	}{
		{"no snapshot_id", &csi.GetMetadataAllocatedRequest{}, codes.InvalidArgument},
		{"negative offset", &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-a", StartingOffset: -1}, codes.OutOfRange},
		{"offset beyond the volume", &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-a", StartingOffset: metaCapacity + 1}, codes.OutOfRange},
		{"unknown snapshot", &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-none"}, codes.NotFound},
		{"driver bug: unsorted", &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-bad"}, codes.Internal},
		{"driver bug: beyond the volume", &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-big"}, codes.Internal},
	} {
		if _, err := readAllocated(t, c, tc.req); status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}
	dst, err := c.GetMetadataDelta(context.Background(), &csi.GetMetadataDeltaRequest{BaseSnapshotId: "snap-a"})
	if err == nil {
		_, err = dst.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "target_snapshot_id") {
		t.Errorf("delta without target: %v, want InvalidArgument naming target_snapshot_id", err)
	}
}

func sizes(ms []*csi.GetMetadataAllocatedResponse) []int {
	var out []int
	for _, m := range ms {
		out = append(out, len(m.GetBlockMetadata()))
	}
	return out
}

// TestSnapshotMetadataNeedsAlpha: the service is alpha in v1.14.
func TestSnapshotMetadataNeedsAlpha(t *testing.T) {
	s := serve(t, newMetaDriver(), csikit.Options{})
	caps := s.srv.Capabilities()
	if s.srv.Serves(csi.SnapshotMetadata_GetMetadataAllocated_FullMethodName) ||
		caps.HasPluginService(csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE) {
		t.Error("SnapshotMetadata served or advertised without Options.Alpha")
	}
	_, err := readAllocated(t, csi.NewSnapshotMetadataClient(s.conn), &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-a"})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("got %v, want Unimplemented", err)
	}
}

// TestSnapshotMetadataLocksSnapshot: while a snapshot's metadata streams,
// DeleteSnapshot of it answers Aborted; afterwards it succeeds.
func TestSnapshotMetadataLocksSnapshot(t *testing.T) {
	d := newMetaDriver()
	d.release, d.started = make(chan struct{}), make(chan struct{})
	s := serve(t, d, csikit.Options{Alpha: true})
	c := csi.NewSnapshotMetadataClient(s.conn)
	done := make(chan error, 1)
	go func() {
		_, err := readAllocated(t, c, &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-a"})
		done <- err
	}()
	<-d.started
	_, err := s.controller().DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: "snap-a"})
	testenv.WantCode(t, err, codes.Aborted)
	close(d.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := s.controller().DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: "snap-a"}); err != nil {
		t.Errorf("DeleteSnapshot after the stream: %v", err)
	}
}

// TestSnapshotMetadataFlowControl: a client that does not read stalls the
// driver (Add blocks in the transport's flow control) instead of letting
// messages pile up in memory; cancelling the call ends the driver's loop.
func TestSnapshotMetadataFlowControl(t *testing.T) {
	d := newMetaDriver()
	d.endless = true
	d.ranges["snap-long"] = nil
	s := serve(t, d, csikit.Options{Alpha: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := csi.NewSnapshotMetadataClient(s.conn).GetMetadataAllocated(ctx, &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-long", MaxResults: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil { // the call is running
		t.Fatal(err)
	}
	// Wait until the driver stops making progress: the count unchanged
	// over three consecutive 100 ms intervals. A server that buffered
	// without bound would keep going (the volume has 2^37 ranges).
	stalled, still := int64(-1), 0
	for i := 0; i < 300 && still < 3; i++ {
		time.Sleep(100 * time.Millisecond)
		if n := d.added.Load(); n == stalled {
			still++
		} else {
			stalled, still = n, 0
		}
	}
	if still < 3 {
		t.Fatalf("driver never stalled (%d ranges added) while the client reads nothing", d.added.Load())
	}
	// Reading lets it continue.
	for i := int64(0); i < 4*stalled && d.added.Load() <= stalled; i++ {
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	if d.added.Load() <= stalled {
		t.Errorf("driver did not continue after the client read (%d ranges)", d.added.Load())
	}
	cancel()
}

// TestBlockMetadataStreamRules: the spec's rules a driver can break.
func TestBlockMetadataStreamRules(t *testing.T) {
	nop := func(csi.BlockMetadataType, int64, []*csi.BlockMetadata) error { return nil }
	ctx := context.Background()
	w := csikit.NewBlockMetadataStream(ctx, 0, 0, nop)
	if err := w.Add(0, 4096); status.Code(err) != codes.Internal {
		t.Errorf("Add before Begin: %v", err)
	}
	if err := w.Begin(csi.BlockMetadataType_UNKNOWN, 1<<20); status.Code(err) != codes.Internal {
		t.Errorf("Begin UNKNOWN: %v", err)
	}
	if err := w.Begin(csi.BlockMetadataType_FIXED_LENGTH, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := w.Begin(csi.BlockMetadataType_FIXED_LENGTH, 1<<20); status.Code(err) != codes.Internal {
		t.Errorf("Begin twice: %v", err)
	}
	for _, tc := range []struct {
		off, size int64
		ok        bool
	}{{0, 0, false}, {0, 4096, true}, {4096, 8192, false}, {0, 4096, false}, {1<<20 - 4096, 4096, true}, {1 << 20, 4096, false}} {
		if err := w.Add(tc.off, tc.size); (err == nil) != tc.ok {
			t.Errorf("Add(%d, %d): %v, want ok %v", tc.off, tc.size, err, tc.ok)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	w = csikit.NewBlockMetadataStream(cctx, 0, 0, nop)
	_ = w.Begin(csi.BlockMetadataType_VARIABLE_LENGTH, 1<<20)
	if err := w.Add(0, 4096); status.Code(err) != codes.Canceled {
		t.Errorf("Add on a cancelled call: %v, want Canceled", err)
	}
}

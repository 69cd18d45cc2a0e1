package idempotency_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/idempotency"
	"github.com/csikit/csikit/internal/logctx"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/locks"
)

// newIC returns an interceptor with csikit's lock keys, amended by o.Keys.
func newIC(t *testing.T, o idempotency.Options) *idempotency.Interceptor {
	t.Helper()
	keys := csikit.LockKeys()
	maps.Copy(keys, o.Keys)
	o.Keys = keys
	ic, err := idempotency.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return ic
}

// call runs req through the interceptor with handler as the driver.
func call(ctx context.Context, ic *idempotency.Interceptor, method string, req any, h grpc.UnaryHandler) (any, error) {
	return ic.UnaryServerInterceptor()(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, h)
}

// blocked starts a call whose driver blocks until the returned release
// function is called; it returns once the driver is running.
func blocked(t *testing.T, ic *idempotency.Interceptor, method string, req any, resp any) (release func() error) {
	t.Helper()
	running, unblock := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := call(context.Background(), ic, method, req, func(context.Context, any) (any, error) {
			close(running)
			<-unblock
			return resp, nil
		})
		done <- err
	}()
	select {
	case <-running:
	case err := <-done:
		t.Fatalf("first %s did not reach the driver: %v", method, err)
	}
	var once sync.Once
	var err error
	release = func() error {
		once.Do(func() { close(unblock); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = release() })
	return release
}

func okHandler(resp any) grpc.UnaryHandler {
	return func(context.Context, any) (any, error) { return resp, nil }
}

func TestReleaseOnPanicAndCancel(t *testing.T) {
	ic := newIC(t, idempotency.Options{Journal: journal.NewMemory()})
	func() {
		defer func() {
			if r := recover(); r != "driver bug" {
				t.Errorf("panic: got %v, want it to propagate", r)
			}
		}()
		_, _ = call(context.Background(), ic, mCreate, createVol("n"), func(context.Context, any) (any, error) { panic("driver bug") })
	}()
	if st := ic.Locks().Stats(); st.Held != 0 {
		t.Fatalf("after panic: got %d held keys, want 0", st.Held)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var firstID string
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, ic, mCreate, createVol("c"), func(ctx context.Context, _ any) (any, error) {
			firstID, _ = journal.ReservedID(ctx)
			<-ctx.Done()
			return nil, status.FromContextError(ctx.Err()).Err()
		})
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("canceled call: got %v, want Canceled", err)
	}
	if st := ic.Locks().Stats(); st.Held != 0 {
		t.Fatalf("after cancel: got %d held keys, want 0", st.Held)
	}
	// The reservation survives the cancel: the retry gets the same ID.
	var again string
	if _, err := call(context.Background(), ic, mCreate, createVol("c"), func(ctx context.Context, _ any) (any, error) {
		again, _ = journal.ReservedID(ctx)
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: again}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if again == "" || again != firstID {
		t.Errorf("retry after cancel: got ID %q, want %q", again, firstID)
	}
}

// fakeDriver creates volumes and snapshots under the reserved ID and counts
// backend objects.
type fakeDriver struct {
	mu      sync.Mutex
	objects map[string]string // id → name
	calls   atomic.Int32
	ready   bool
	fail    error
}

func newFakeDriver() *fakeDriver { return &fakeDriver{objects: map[string]string{}, ready: true} }

func (d *fakeDriver) handler(ctx context.Context, req any) (any, error) {
	d.calls.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return nil, d.fail
	}
	id, ok := journal.ReservedID(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no reserved ID")
	}
	switch r := req.(type) {
	case *csi.CreateVolumeRequest:
		d.objects[id] = r.GetName()
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: r.GetCapacityRange().GetRequiredBytes()}}, nil
	case *csi.CreateSnapshotRequest:
		d.objects[id] = r.GetName()
		return &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{SnapshotId: id, SourceVolumeId: r.GetSourceVolumeId(), ReadyToUse: d.ready}}, nil
	}
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (d *fakeDriver) deleteHandler(_ context.Context, req any) (any, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch r := req.(type) {
	case *csi.DeleteVolumeRequest:
		delete(d.objects, r.GetVolumeId())
		return &csi.DeleteVolumeResponse{}, nil
	case *csi.DeleteSnapshotRequest:
		delete(d.objects, r.GetSnapshotId())
		return &csi.DeleteSnapshotResponse{}, nil
	}
	return nil, status.Error(codes.Unimplemented, "fake")
}

func volID(t *testing.T, ic *idempotency.Interceptor, req *csi.CreateVolumeRequest, h grpc.UnaryHandler) string {
	t.Helper()
	resp, err := call(context.Background(), ic, mCreate, req, h)
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	return resp.(*csi.CreateVolumeResponse).GetVolume().GetVolumeId()
}

func TestCreateRetryDeleteFlow(t *testing.T) {
	ctx := context.Background()
	for storeName, open := range stores() {
		t.Run(storeName, func(t *testing.T) {
			d := newFakeDriver()
			ic := newIC(t, idempotency.Options{Journal: open(t), NewID: func(name string) string { return "csi-vol-" + journal.RandomID(name) }})
			id := volID(t, ic, createVol("pvc-1"), d.handler)
			if !strings.HasPrefix(id, "csi-vol-") {
				t.Errorf("ID: got %q, want the NewID format csi-vol-…", id)
			}
			// Retry: same answer, driver not called again.
			again := volID(t, ic, createVol("pvc-1"), d.handler)
			if again != id || d.calls.Load() != 1 {
				t.Errorf("retry: got ID %q after %d driver calls, want %q after 1", again, d.calls.Load(), id)
			}
			// Same name, other parameters: AlreadyExists, driver not called.
			other := createVol("pvc-1")
			other.Parameters = map[string]string{"type": "fast"}
			_, err := call(ctx, ic, mCreate, other, d.handler)
			testenv.WantCode(t, err, codes.AlreadyExists) // other parameters
			if d.calls.Load() != 1 {
				t.Errorf("driver calls: got %d, want 1", d.calls.Load())
			}
			// Delete releases the name; a new create gets a new ID.
			if _, err := call(ctx, ic, mDelete, &csi.DeleteVolumeRequest{VolumeId: id}, d.deleteHandler); err != nil {
				t.Fatal(err)
			}
			fresh := volID(t, ic, other, d.handler)
			if fresh == id {
				t.Errorf("create after delete: got the deleted ID %q, want a new one", id)
			}
			if len(d.objects) != 1 {
				t.Errorf("backend objects: got %v, want 1", d.objects)
			}
			if st := ic.Locks().Stats(); st.Held != 0 {
				t.Errorf("got %d held keys, want 0", st.Held)
			}
		})
	}
}

func TestRetryWhileRunningIsAborted(t *testing.T) {
	ctx := context.Background()
	d := newFakeDriver()
	ic := newIC(t, idempotency.Options{Journal: journal.NewMemory()})
	running, unblock := make(chan string), make(chan struct{})
	first := make(chan string, 1)
	go func() {
		resp, err := call(ctx, ic, mCreate, createVol("pvc-1"), func(ctx context.Context, req any) (any, error) {
			id, _ := journal.ReservedID(ctx)
			running <- id
			<-unblock
			return d.handler(ctx, req)
		})
		if err != nil {
			first <- "error: " + err.Error()
			return
		}
		first <- resp.(*csi.CreateVolumeResponse).GetVolume().GetVolumeId()
	}()
	reserved := <-running
	_, err := call(ctx, ic, mCreate, createVol("pvc-1"), d.handler)
	testenv.WantCode(t, err, codes.Aborted) // retry while running
	// Delete of the reserved ID is excluded too, once the ID is known.
	_, err = call(ctx, ic, mDelete, &csi.DeleteVolumeRequest{VolumeId: reserved}, d.deleteHandler)
	testenv.WantCode(t, err, codes.Aborted) // delete while creating
	close(unblock)
	if got := <-first; got != reserved {
		t.Fatalf("first call: got %q, want %q", got, reserved)
	}
	if got := volID(t, ic, createVol("pvc-1"), d.handler); got != reserved {
		t.Errorf("retry after completion: got %q, want %q", got, reserved)
	}
	if n := d.calls.Load(); n != 1 {
		t.Errorf("driver calls: got %d, want 1", n)
	}
}

// TestDeleteExcludesCreateOfSameName: while DeleteVolume of a committed
// volume runs, a create of its name is Aborted (the journal links them).
func TestDeleteExcludesCreateOfSameName(t *testing.T) {
	ctx := context.Background()
	d := newFakeDriver()
	ic := newIC(t, idempotency.Options{Journal: journal.NewMemory()})
	id := volID(t, ic, createVol("pvc-1"), d.handler)
	release := blocked(t, ic, mDelete, &csi.DeleteVolumeRequest{VolumeId: id}, &csi.DeleteVolumeResponse{})
	_, err := call(ctx, ic, mCreate, createVol("pvc-1"), d.handler)
	testenv.WantCode(t, err, codes.Aborted) // create during delete
	if err := release(); err != nil {
		t.Fatal(err)
	}
}

func TestDriverErrors(t *testing.T) {
	ctx := context.Background()
	j := journal.NewMemory()
	d := newFakeDriver()
	ic := newIC(t, idempotency.Options{Journal: j})
	// A refused request drops its reservation...
	d.fail = status.Error(codes.OutOfRange, "too big")
	_, err := call(ctx, ic, mCreate, createVol("pvc-1"), d.handler)
	testenv.WantCode(t, err, codes.OutOfRange) // refused create
	if _, ok, _ := j.LookupName(ctx, journal.KindVolume, "pvc-1"); ok {
		t.Error("after OutOfRange: reservation kept, want dropped")
	}
	// NotFound from a create is the spec's "content source does not
	// exist": a refusal too, nothing was made.
	d.fail = status.Error(codes.NotFound, "source snapshot snap-9 does not exist")
	_, err = call(ctx, ic, mCreate, createVol("pvc-nf"), d.handler)
	testenv.WantCode(t, err, codes.NotFound) // refused create
	if _, ok, _ := j.LookupName(ctx, journal.KindVolume, "pvc-nf"); ok {
		t.Error("after NotFound: reservation kept, want dropped")
	}
	// ...any other error keeps it, so the retry reuses the ID.
	d.fail = status.Error(codes.Unavailable, "backend down")
	_, err = call(ctx, ic, mCreate, createVol("pvc-2"), d.handler)
	testenv.WantCode(t, err, codes.Unavailable) // failed create
	rec, ok, _ := j.LookupName(ctx, journal.KindVolume, "pvc-2")
	if !ok || rec.Committed {
		t.Fatalf("after Unavailable: got %+v, %v; want an uncommitted reservation", rec, ok)
	}
	d.fail = nil
	if got := volID(t, ic, createVol("pvc-2"), d.handler); got != rec.ID {
		t.Errorf("retry: got %q, want reserved %q", got, rec.ID)
	}
	// A driver that returns no ID is a driver bug, reported as Internal.
	_, err = call(ctx, ic, mCreate, createVol("pvc-3"), okHandler(&csi.CreateVolumeResponse{}))
	testenv.WantCode(t, err, codes.Internal) // response without ID
	// A driver that ignores the reserved ID gets its own ID recorded.
	if _, err := call(ctx, ic, mCreate, createVol("pvc-4"), okHandler(&csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "own-id"}})); err != nil {
		t.Fatal(err)
	}
	if rec, ok, _ := j.LookupID(ctx, journal.KindVolume, "own-id"); !ok || rec.Name != "pvc-4" {
		t.Errorf("driver's own ID: got %+v, %v; want bound to pvc-4", rec, ok)
	}
	// An empty NewID is a configuration bug.
	bad := newIC(t, idempotency.Options{Journal: j, NewID: func(string) string { return "" }})
	_, err = call(ctx, bad, mCreate, createVol("pvc-5"), d.handler)
	testenv.WantCode(t, err, codes.Internal) // empty NewID
}

func TestSnapshotReadiness(t *testing.T) {
	ctx := context.Background()
	d := newFakeDriver()
	d.ready = false
	ic := newIC(t, idempotency.Options{Journal: journal.NewMemory(), NewSnapshotID: func(string) string { return "csi-snap-" + journal.RandomID("") }})
	req := &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: "v"}
	snapID := func() (string, bool) {
		resp, err := call(ctx, ic, mSnap, req, d.handler)
		if err != nil {
			t.Fatal(err)
		}
		s := resp.(*csi.CreateSnapshotResponse).GetSnapshot()
		return s.GetSnapshotId(), s.GetReadyToUse()
	}
	id1, ready := snapID()
	if ready || !strings.HasPrefix(id1, "csi-snap-") {
		t.Fatalf("first call: got %q ready=%v, want csi-snap-… not ready", id1, ready)
	}
	d.ready = true
	id2, ready := snapID()
	if id2 != id1 || !ready || d.calls.Load() != 2 {
		t.Fatalf("poll: got %q ready=%v after %d calls, want %q ready after 2", id2, ready, d.calls.Load(), id1)
	}
	id3, _ := snapID()
	if id3 != id1 || d.calls.Load() != 2 {
		t.Errorf("retry when ready: got %q after %d calls, want %q replayed after 2", id3, d.calls.Load(), id1)
	}
	diff := &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: "w"}
	_, err := call(ctx, ic, mSnap, diff, d.handler)
	testenv.WantCode(t, err, codes.AlreadyExists) // same snapshot name, other source
	if _, err := call(ctx, ic, mDelSnap, &csi.DeleteSnapshotRequest{SnapshotId: id1}, d.deleteHandler); err != nil {
		t.Fatal(err)
	}
	if _, err := call(ctx, ic, mSnap, diff, d.handler); err != nil {
		t.Errorf("after DeleteSnapshot, name reusable: got %v", err)
	}
}

// TestRetryAfterRestart: the driver's process dies after the backend object
// was made but before commit; the restarted plugin reopens the file journal
// and the retry reaches the driver with the same reserved ID.
func TestRetryAfterRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	d := newFakeDriver()
	j, err := journal.OpenFile(path, journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ic := newIC(t, idempotency.Options{Journal: j})
	_, err = call(ctx, ic, mCreate, createVol("pvc-1"), func(ctx context.Context, req any) (any, error) {
		_, _ = d.handler(ctx, req) // backend object made...
		return nil, errors.New("process killed")
	})
	if err == nil {
		t.Fatal("first call: got nil error")
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, err = journal.OpenFile(path, journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	ic = newIC(t, idempotency.Options{Journal: j})
	volID(t, ic, createVol("pvc-1"), d.handler)
	if len(d.objects) != 1 {
		t.Errorf("backend objects after retry: got %v, want exactly 1", d.objects)
	}
}

func TestOddInput(t *testing.T) {
	ctx := context.Background()
	ic := newIC(t, idempotency.Options{Journal: journal.NewMemory()})
	reqs := []rpc{
		{mCreate, nil},
		{mCreate, (*csi.CreateVolumeRequest)(nil)},
		{mCreate, &csi.DeleteVolumeRequest{VolumeId: "v"}}, // wrong type for the method
		{mCreate, &csi.CreateVolumeRequest{}},              // empty name
		{mDelete, &csi.DeleteVolumeRequest{}},
		{mSnap, (*csi.CreateSnapshotRequest)(nil)},
		{csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName, &csi.DeleteVolumeGroupSnapshotRequest{}},
		{"/unknown.Service/Method", "not a proto"},
	}
	for _, r := range reqs {
		called := false
		_, err := call(ctx, ic, r.method, r.req, func(context.Context, any) (any, error) { called = true; return nil, nil })
		if err != nil || !called {
			t.Errorf("%s %T: got err %v, called %v; want the driver called", r.method, r.req, err, called)
		}
	}
	if st := ic.Locks().Stats(); st.Held != 0 {
		t.Errorf("got %d held keys, want 0", st.Held)
	}
}

func TestNoJournal(t *testing.T) {
	ic := newIC(t, idempotency.Options{})
	_, err := call(context.Background(), ic, mCreate, createVol("n"), func(ctx context.Context, _ any) (any, error) {
		if id, ok := journal.ReservedID(ctx); ok {
			t.Errorf("ReservedID without journal: got %q, true; want false", id)
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDeterministicIDExcludesDelete: with IDs derived from names, a create
// must not run beside a delete of the ID it is about to reuse, even when
// the delete found no journal record (so could not lock the name).
func TestDeterministicIDExcludesDelete(t *testing.T) {
	d := newFakeDriver()
	ic := newIC(t, idempotency.Options{Journal: journal.NewMemory(), NewID: func(name string) string { return "id-" + name }})
	release := blocked(t, ic, mDelete, &csi.DeleteVolumeRequest{VolumeId: "id-pvc-1"}, &csi.DeleteVolumeResponse{})
	_, err := call(context.Background(), ic, mCreate, createVol("pvc-1"), d.handler)
	testenv.WantCode(t, err, codes.Aborted) // create of an ID being deleted
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if got := volID(t, ic, createVol("pvc-1"), d.handler); got != "id-pvc-1" {
		t.Errorf("create after delete: got %q, want id-pvc-1", got)
	}
}

// BenchmarkInterceptor measures the per-call cost the interceptor adds:
// a publish (one volume lock, no journal) and a replayed CreateVolume retry
// (name and ID locks, journal lookup, response decode) on the memory store.
func BenchmarkInterceptor(b *testing.B) {
	ctx := context.Background()
	b.Run("publish", func(b *testing.B) {
		ic, _ := idempotency.New(idempotency.Options{})
		req := &csi.ControllerPublishVolumeRequest{VolumeId: "vol-0123456789abcdef", NodeId: "node-1"}
		h := okHandler(&csi.ControllerPublishVolumeResponse{})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := call(ctx, ic, mPublish, req, h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unkeyed", func(b *testing.B) {
		ic, _ := idempotency.New(idempotency.Options{Journal: journal.NewMemory()})
		req := &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-0123456789abcdef", VolumePath: "/var/lib/kubelet/pods/x"}
		h := okHandler(&csi.NodeGetVolumeStatsResponse{})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := call(ctx, ic, csi.Node_NodeGetVolumeStats_FullMethodName, req, h); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("create-retry", func(b *testing.B) {
		ic, _ := idempotency.New(idempotency.Options{Journal: journal.NewMemory()})
		d := newFakeDriver()
		if _, err := call(ctx, ic, mCreate, createVol("pvc-1"), d.handler); err != nil {
			b.Fatal(err)
		}
		req := createVol("pvc-1")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := call(ctx, ic, mCreate, req, d.handler); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestLockAgeFromCallStart: a lock's age, told to a conflicting caller,
// counts from the start of the holder's call as the logging interceptor
// recorded it in the call's context.
func TestLockAgeFromCallStart(t *testing.T) {
	ic := newIC(t, idempotency.Options{})
	req := &csi.CreateVolumeRequest{Name: "pvc-1"}
	running, unblock := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	start := time.Now().Add(-time.Hour)
	go func() {
		ctx := logctx.NewContext(context.Background(), slog.DiscardHandler, mCreate, nil, start)
		_, err := call(ctx, ic, mCreate, req, func(context.Context, any) (any, error) {
			close(running)
			<-unblock
			return &csi.CreateVolumeResponse{}, nil
		})
		done <- err
	}()
	<-running
	_, err := call(context.Background(), ic, mCreate, req, okHandler(&csi.CreateVolumeResponse{}))
	close(unblock)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "has held it for 1h0m0s") {
		t.Errorf("got %v, want Aborted saying the name has been held for 1h0m0s", err)
	}
}

// TestInterceptorAllocs: a locked call without a journal allocates only
// what its key function returns; the lock set stays on the stack.
func TestInterceptorAllocs(t *testing.T) {
	ic := newIC(t, idempotency.Options{})
	req := &csi.CreateVolumeRequest{Name: "pvc-1"}
	h := okHandler(&csi.CreateVolumeResponse{})
	ctx, icf, info := context.Background(), ic.UnaryServerInterceptor(), &grpc.UnaryServerInfo{FullMethod: mCreate}
	if allocs := testing.AllocsPerRun(200, func() { icf(ctx, req, info, h) }); allocs != 1 {
		t.Errorf("CreateVolume through the interceptor: got %v allocs, want 1 (the key function's slice)", allocs)
	}
}

// TestManyLocksAllOrNone: a call holding more locks than the lock set
// keeps inline takes all or none of them and releases all.
func TestManyLocksAllOrNone(t *testing.T) {
	ic := newIC(t, idempotency.Options{})
	tab := ic.Locks()
	req := &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "g", SnapshotIds: []string{"s1", "s2", "s3", "s4"}}
	// 9 locks: the group and two per snapshot; the last one is taken.
	busy := locks.Key{Space: locks.SpaceSourceSnapshot, ID: "s4"}
	if _, ok := tab.TryLock(busy, locks.Exclusive, locks.Owner{Method: "test"}); !ok {
		t.Fatal("could not take the busy key")
	}
	m := csi.GroupController_DeleteVolumeGroupSnapshot_FullMethodName
	_, err := call(context.Background(), ic, m, req, okHandler(&csi.DeleteVolumeGroupSnapshotResponse{}))
	if status.Code(err) != codes.Aborted {
		t.Fatalf("got %v, want Aborted", err)
	}
	if held := tab.Stats().Held; held != 1 {
		t.Errorf("after the conflict: %d keys held, want 1 (the busy key)", held)
	}
	tab.Unlock(busy, locks.Exclusive)
	var during int
	_, err = call(context.Background(), ic, m, req, func(context.Context, any) (any, error) {
		during = tab.Stats().Held
		return &csi.DeleteVolumeGroupSnapshotResponse{}, nil
	})
	if err != nil || during != 9 {
		t.Errorf("got %v with %d keys held during the call, want success with 9", err, during)
	}
	if held := tab.Stats().Held; held != 0 {
		t.Errorf("after the call: %d keys held, want 0", held)
	}
}

// TestDriverSeesWhetherItsReservationIsFresh: the first attempt at a name
// made its reservation (journal.ReservedFresh), a retry after an attempt
// that failed midway did not — the driver must then look for what that
// attempt left under the ID.
func TestDriverSeesWhetherItsReservationIsFresh(t *testing.T) {
	ctx := context.Background()
	for storeName, open := range stores() {
		t.Run(storeName, func(t *testing.T) {
			ic := newIC(t, idempotency.Options{Journal: open(t)})
			var fresh []bool
			var ids []string
			h := func(fail bool) grpc.UnaryHandler {
				return func(ctx context.Context, _ any) (any, error) {
					id, _ := journal.ReservedID(ctx)
					ids = append(ids, id)
					fresh = append(fresh, journal.ReservedFresh(ctx))
					if fail {
						return nil, status.Error(codes.Unavailable, "backend busy")
					}
					return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id}}, nil
				}
			}
			if _, err := call(ctx, ic, mCreate, createVol("pvc-f"), h(true)); status.Code(err) != codes.Unavailable {
				t.Fatalf("first attempt: got %v, want Unavailable", err)
			}
			if _, err := call(ctx, ic, mCreate, createVol("pvc-f"), h(false)); err != nil {
				t.Fatal(err)
			}
			if _, err := call(ctx, ic, mCreate, createVol("pvc-g"), h(false)); err != nil {
				t.Fatal(err)
			}
			if want := []bool{true, false, true}; !slices.Equal(fresh, want) || ids[0] != ids[1] {
				t.Errorf("fresh: got %v for IDs %v, want %v with the retry on the first ID", fresh, ids, want)
			}
		})
	}
}

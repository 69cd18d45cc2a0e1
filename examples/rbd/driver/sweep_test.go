package driver_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
)

// serveDriver runs d through csikit on a unix socket (a controller
// replica) and returns a controller client.
func serveDriver(t *testing.T, d *driver.Driver) csi.ControllerClient {
	t.Helper()
	srv, err := csikit.NewServer(d.Service(), d.ServerOptions(csikit.Options{Name: "rbd.csikit.dev", Version: "v0.0.0-test", NodeID: "replica"}))
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.ListenAndServe(ctx, "unix://"+sock); close(done) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(); cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server never answered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return csi.NewControllerClient(conn)
}

// abandoned leaves, in pool, what a create killed after making its image
// leaves: an uncommitted reservation for req (whose lease ends after
// lease) and the image. It returns the reserved ID.
func abandoned(t *testing.T, c cephtest.Cluster, secrets map[string]string, pool string, req *csi.CreateVolumeRequest, lease time.Duration) string {
	t.Helper()
	creds := driver.Credentials{User: secrets["userID"], Key: secrets["userKey"]}
	conns := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	t.Cleanup(conns.Close)
	conn, done, err := conns.Conn(context.Background(), creds)
	if err != nil {
		t.Fatal(err)
	}
	poolID, err := conn.GetPoolByName(pool)
	done()
	if err != nil {
		t.Fatal(err)
	}
	fp, _ := journal.Fingerprint(req)
	id := fmt.Sprintf("%d-m%s", poolID, journal.RandomID(""))
	j := driver.NewOmapJournal(conns, creds, pool).WithLease(lease)
	if _, err := j.Reserve(context.Background(), journal.Reservation{Kind: journal.KindVolume, Name: req.Name, Fingerprint: fp, ID: id}); err != nil {
		t.Fatal(err)
	}
	io, done, err := conns.IOContext(context.Background(), creds, pool, "")
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if err := rbd.CreateImage(io, "csi-vol-"+localOf(id), 4<<20, rbd.NewRbdImageOptions()); err != nil {
		t.Fatal(err)
	}
	return id
}

func tenantCreate(name, pool string, secrets map[string]string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name: name, Secrets: secrets, Parameters: map[string]string{driver.ParamPool: pool},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20}, VolumeCapabilities: mountCap,
	}
}

// TestSweepCannotOvertakeRetry: replica A sweeps a reservation whose
// create was abandoned (lease expired) just as replica B serves the CO's
// retry of it. Whichever comes first wins whole: here the retry, so the
// sweep must leave its image and its committed record alone. (The sweep is
// paused between deciding the reservation is abandoned and acting on it,
// where the retry lands.)
func TestSweepCannotOvertakeRetry(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := cephtest.TenantPool(t, c)
	a := newDriver(t, c, driver.Options{})
	b := serveDriver(t, newDriver(t, c, driver.Options{}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A serves the pool first (so its sweep covers it).
	if _, err := serveDriver(t, a).CreateVolume(ctx, tenantCreate("served-by-a", pool, secrets)); err != nil {
		t.Fatal(err)
	}
	req := tenantCreate("retried", pool, secrets)
	id := abandoned(t, c, secrets, pool, req, time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	var retried string
	var retryErr error
	driver.SetSweepPause(func(name string) {
		if name != req.Name {
			return
		}
		resp, err := b.CreateVolume(ctx, req)
		retried, retryErr = resp.GetVolume().GetVolumeId(), err
	})
	t.Cleanup(func() { driver.SetSweepPause(nil) })
	n, err := a.SweepAbandoned(ctx, journal.KindVolume, time.Nanosecond)
	t.Logf("sweep released %d, %v", n, err)
	if retryErr != nil || retried != id {
		t.Fatalf("the retry answered %q, %v; want %s", retried, retryErr, id)
	}
	// What B answered must still stand.
	if !poolHas(t, c, secrets, pool, "csi-vol-"+localOf(id)) {
		t.Fatalf("the sweep removed image of %s after the retry answered it", id)
	}
	again, err := b.CreateVolume(ctx, req)
	if err != nil || again.GetVolume().GetVolumeId() != id {
		t.Fatalf("another retry answered %v, %v; want %s (the record the retry committed)", again, err, id)
	}
}

// TestSweepTakesOverStalledCreate: a reservation whose lease expired
// (its create stalled) is claimed by the sweep; from the claim on, the
// stalled create can neither renew nor commit it, a retry is told to
// retry (Aborted) until the sweep released it, and then starts afresh
// under a new ID.
func TestSweepTakesOverStalledCreate(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := cephtest.TenantPool(t, c)
	creds := driver.Credentials{User: secrets["userID"], Key: secrets["userKey"]}
	conns := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	t.Cleanup(conns.Close)
	// A lease long enough that Reserve then Sweep fit in it under -race
	// on a loaded machine (50 ms did not, at load 17-28).
	const lease = time.Second
	j := driver.NewOmapJournal(conns, creds, pool).WithLease(lease)
	ctx := context.Background()
	k := journal.KindVolume
	res := journal.Reservation{Kind: k, Name: "stalled", Fingerprint: []byte("fp"), ID: "id-1"}
	rec, err := j.Reserve(ctx, res)
	if err != nil || !rec.Fresh {
		t.Fatalf("Reserve = %+v, %v; want a fresh record", rec, err)
	}
	// Within its lease the create holds it: no sweep takes it.
	if n, err := j.Sweep(ctx, k, time.Nanosecond, func(context.Context, journal.Record) error {
		t.Fatal("the sweep cleaned a reservation whose lease runs")
		return nil
	}); err != nil || n != 0 {
		t.Fatalf("Sweep within the lease = %d, %v", n, err)
	}
	if err := j.Hold(ctx, k, "stalled", "id-1"); err != nil {
		t.Fatalf("Hold within the lease: %v", err)
	}
	time.Sleep(lease + 100*time.Millisecond) // the create stalls past its lease
	var during []error
	n, err := j.Sweep(ctx, k, time.Nanosecond, func(_ context.Context, r journal.Record) error {
		if r.ID != "id-1" {
			t.Errorf("cleaning %s", r.ID)
		}
		during = append(during,
			j.Hold(ctx, k, "stalled", "id-1"),
			j.Commit(ctx, k, "stalled", "id-1", []byte("resp")))
		_, rerr := j.Reserve(ctx, journal.Reservation{Kind: k, Name: "stalled", Fingerprint: []byte("fp"), ID: "id-2"})
		during = append(during, rerr)
		return nil
	})
	if err != nil || n != 1 {
		t.Fatalf("Sweep after the lease = %d, %v; want 1 released", n, err)
	}
	for i, what := range []string{"the stalled create's Hold", "its Commit", "a retry's Reserve"} {
		if status.Code(during[i]) != codes.Aborted {
			t.Errorf("%s while the sweep holds the reservation = %v; want Aborted", what, during[i])
		}
	}
	rec, err = j.Reserve(ctx, journal.Reservation{Kind: k, Name: "stalled", Fingerprint: []byte("fp"), ID: "id-3"})
	if err != nil || rec.ID != "id-3" || !rec.Fresh {
		t.Fatalf("Reserve after the sweep = %+v, %v; want a fresh reservation for id-3", rec, err)
	}
	if err := j.Commit(ctx, k, "stalled", "id-3", []byte("r")); err != nil {
		t.Fatal(err)
	}
}

// TestStalledCreateUndoesItself: a create that resumes after the sweep
// claimed its reservation (it stalled past its lease) makes its image,
// finds its lease lost, removes the image and answers Aborted; the sweep
// then releases the reservation and the pool holds nothing: no orphaned
// image, and the CO's retry starts afresh.
func TestStalledCreateUndoesItself(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := cephtest.TenantPool(t, c)
	d := newDriver(t, c, driver.Options{CreateLease: 50 * time.Millisecond})
	req := tenantCreate("stalled", pool, secrets)
	ctx := journal.ContextWithRequest(context.Background(), req)
	fp, _ := journal.Fingerprint(req)
	rec, err := d.Journal().Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: req.Name, Fingerprint: fp, ID: journal.RandomID("")})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the create stalls past its lease
	if _, err := d.SweepAbandoned(context.Background(), journal.KindVolume, time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	// Resumed after the sweep: nothing to hold any more.
	_, resumed := d.CreateVolume(journal.ContextWithReservedID(ctx, rec.ID), req)
	if status.Code(resumed) != codes.Aborted {
		t.Fatalf("the stalled create, resumed after the sweep, answered %v; want Aborted", resumed)
	}
	if poolHas(t, c, secrets, pool, "csi-vol-"+localOf(rec.ID)) {
		t.Fatalf("the stalled create left image of %s behind", rec.ID)
	}
	// And while the sweep holds the claim (here: during its clean).
	rec2, err := d.Journal().Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: req.Name, Fingerprint: fp, ID: journal.RandomID("")})
	if err != nil || rec2.ID == rec.ID {
		t.Fatalf("the retry after the sweep got %+v, %v; want a new reservation", rec2, err)
	}
	time.Sleep(100 * time.Millisecond)
	conns := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	t.Cleanup(conns.Close)
	j := driver.NewOmapJournal(conns, driver.Credentials{User: secrets["userID"], Key: secrets["userKey"]}, pool).WithLease(50 * time.Millisecond)
	if _, err := j.Sweep(context.Background(), journal.KindVolume, time.Nanosecond, func(context.Context, journal.Record) error {
		_, resumed = d.CreateVolume(journal.ContextWithReservedID(ctx, rec2.ID), req)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if status.Code(resumed) != codes.Aborted {
		t.Fatalf("the stalled create, resumed while the sweep cleaned, answered %v; want Aborted", resumed)
	}
	if poolHas(t, c, secrets, pool, "csi-vol-"+localOf(rec2.ID)) {
		t.Fatalf("the stalled create left image of %s behind", rec2.ID)
	}
}

// TestTwoSweepsOneClaim: two replicas sweeping the same pool at once
// clean and release each abandoned reservation exactly once.
func TestTwoSweepsOneClaim(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := cephtest.TenantPool(t, c)
	creds := driver.Credentials{User: secrets["userID"], Key: secrets["userKey"]}
	var js [2]*driver.OmapJournal
	for i := range js {
		conns := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute) // a replica each
		t.Cleanup(conns.Close)
		js[i] = driver.NewOmapJournal(conns, creds, pool)
	}
	ctx := context.Background()
	const n = 20
	for i := range n {
		// Creates whose lease has long expired.
		if _, err := js[0].WithLease(time.Millisecond).Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: fmt.Sprintf("gone-%d", i), ID: fmt.Sprintf("id-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond)
	var mu sync.Mutex
	cleaned := map[string]int{}
	var released [2]int
	var errs [2]error
	var wg sync.WaitGroup
	for i, j := range js {
		wg.Add(1)
		go func() {
			defer wg.Done()
			released[i], errs[i] = j.Sweep(ctx, journal.KindVolume, time.Nanosecond, func(_ context.Context, r journal.Record) error {
				mu.Lock()
				cleaned[r.ID]++
				mu.Unlock()
				time.Sleep(time.Millisecond)
				return nil
			})
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("sweeps: %v, %v", errs[0], errs[1])
	}
	if released[0]+released[1] != n || len(cleaned) != n {
		t.Errorf("the sweeps released %d + %d and cleaned %d reservations; want %d in all", released[0], released[1], len(cleaned), n)
	}
	for id, k := range cleaned {
		if k != 1 {
			t.Errorf("%s cleaned %d times", id, k)
		}
	}
	if recs, err := js[1].Uncommitted(ctx, journal.KindVolume, time.Now()); err != nil || len(recs) != 0 {
		t.Fatalf("after the sweeps: %d reservations left (%v)", len(recs), err)
	}
	t.Logf("replica A released %d, replica B %d", released[0], released[1])
}

func poolHas(t *testing.T, c cephtest.Cluster, secrets map[string]string, pool, image string) bool {
	t.Helper()
	conns := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	defer conns.Close()
	io, done, err := conns.IOContext(context.Background(), driver.Credentials{User: secrets["userID"], Key: secrets["userKey"]}, pool, "")
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	names, err := rbd.GetImageNames(io)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == image {
			return true
		}
	}
	return false
}

// TestSweepForgetsAbandonedSize: a create killed after it recorded its
// volume's size and before its commit leaves the record too; the sweep
// removes it with the image, so no record outlives its volume.
func TestSweepForgetsAbandonedSize(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := cephtest.TenantPool(t, c)
	d := newDriver(t, c, driver.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := serveDriver(t, d).CreateVolume(ctx, tenantCreate("served", pool, secrets)); err != nil {
		t.Fatal(err)
	}
	id := abandoned(t, c, secrets, pool, tenantCreate("killed-after-record", pool, secrets), time.Millisecond)
	image := "csi-vol-" + localOf(id)
	conns := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	t.Cleanup(conns.Close)
	jio, done, err := conns.IOContext(ctx, driver.Credentials{User: secrets["userID"], Key: secrets["userKey"]}, pool, driver.JournalNamespace)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if err := jio.SetOmap(driver.SizesObject, map[string][]byte{image: []byte("4194304")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if n, err := d.SweepAbandoned(ctx, journal.KindVolume, time.Nanosecond); err != nil || n != 1 {
		t.Fatalf("SweepAbandoned = %d, %v; want 1 released", n, err)
	}
	if poolHas(t, c, secrets, pool, image) {
		t.Errorf("the sweep left image %s", image)
	}
	m, _, err := driver.ReadOmap(jio, driver.SizesObject)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m[image]; ok {
		t.Errorf("the sweep left the recorded size %q of %s", v, image)
	}
}

package driver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/journal/journaltest"
)

func newJournal(t *testing.T, c cephtest.Cluster) *driver.OmapJournal {
	t.Helper()
	pool := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	t.Cleanup(pool.Close)
	return driver.NewOmapJournal(pool, driver.Credentials{User: c.User, Key: c.Key}, c.Pool)
}

func TestOmapJournal(t *testing.T) {
	c := cephtest.Require(t)
	j := newJournal(t, c)
	ctx := context.Background()
	name, id := "pvc-"+journal.RandomID(""), journal.RandomID("")
	fp := []byte{1, 2, 3}

	rec, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: name, Fingerprint: fp, ID: id})
	if err != nil || rec.ID != id || rec.Committed {
		t.Fatalf("Reserve = %+v, %v; want ID %s uncommitted", rec, err, id)
	}
	// A retry with another ID gets the first one.
	rec, err = j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: name, Fingerprint: fp, ID: "other"})
	if err != nil || rec.ID != id {
		t.Fatalf("retried Reserve = %+v, %v; want ID %s", rec, err, id)
	}
	// Same name, other kind: independent.
	if rec, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindSnapshot, Name: name, Fingerprint: fp, ID: id}); err != nil || rec.ID != id {
		t.Fatalf("snapshot Reserve = %+v, %v", rec, err)
	}
	t.Cleanup(func() { _ = j.Release(ctx, journal.KindSnapshot, id) })
	// Different parameters: AlreadyExists.
	if _, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: name, Fingerprint: []byte{9}, ID: "x"}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("Reserve with another fingerprint: %v, want AlreadyExists", err)
	}
	if err := j.Commit(ctx, journal.KindVolume, "pvc-never-reserved-"+id, id, nil); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Commit without reservation: %v, want FailedPrecondition", err)
	}
	if err := j.Commit(ctx, journal.KindVolume, name, id, []byte("resp")); err != nil {
		t.Fatal(err)
	}
	got, ok, err := j.LookupName(ctx, journal.KindVolume, name)
	if err != nil || !ok || !got.Committed || string(got.Response) != "resp" || got.ID != id {
		t.Fatalf("LookupName = %+v, %v, %v", got, ok, err)
	}
	got, ok, err = j.LookupID(ctx, journal.KindVolume, id)
	if err != nil || !ok || got.Name != name {
		t.Fatalf("LookupID = %+v, %v, %v", got, ok, err)
	}
	if err := j.Release(ctx, journal.KindVolume, id); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := j.LookupName(ctx, journal.KindVolume, name); ok || err != nil {
		t.Fatalf("after Release: LookupName found=%v err=%v", ok, err)
	}
	if _, ok, err := j.LookupID(ctx, journal.KindVolume, id); ok || err != nil {
		t.Fatalf("after Release: LookupID found=%v err=%v", ok, err)
	}
	if err := j.Release(ctx, journal.KindVolume, id); err != nil {
		t.Fatalf("second Release: %v", err)
	}
}

// Two RADOS clients (as two controller replicas have) reserve one name at
// once, many times over: every round binds exactly one ID.
func TestOmapJournalRace(t *testing.T) {
	c := cephtest.Require(t)
	a, b := newJournal(t, c), newJournal(t, c)
	ctx := context.Background()
	for round := range 20 {
		name := "race-" + journal.RandomID("")
		ids := [2]string{}
		var wg sync.WaitGroup
		var errs [2]error
		for i, j := range []*driver.OmapJournal{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: name, Fingerprint: []byte("fp"), ID: journal.RandomID("")})
				ids[i], errs[i] = rec.ID, err
			}()
		}
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if ids[0] != ids[1] {
			t.Fatalf("round %d: the replicas got IDs %s and %s for one name", round, ids[0], ids[1])
		}
		if err := a.Release(ctx, journal.KindVolume, ids[0]); err != nil {
			t.Fatal(err)
		}
	}
}

// The sweep finds an old uncommitted reservation in the cluster, cleans it
// and releases it, and leaves a committed one alone.
func TestOmapJournalSweep(t *testing.T) {
	c := cephtest.Require(t)
	j := newJournal(t, c)
	ctx := context.Background()
	abandoned, kept := "abandoned-"+journal.RandomID(""), "kept-"+journal.RandomID("")
	aID, kID := journal.RandomID(""), journal.RandomID("")
	for _, r := range []journal.Reservation{{Kind: journal.KindVolume, Name: abandoned, ID: aID}, {Kind: journal.KindVolume, Name: kept, ID: kID}} {
		if _, err := j.Reserve(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = j.Release(ctx, journal.KindVolume, kID) })
	if err := j.Commit(ctx, journal.KindVolume, kept, kID, []byte("r")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	recs, err := j.Uncommitted(ctx, journal.KindVolume, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range recs {
		if r.Name == kept {
			t.Fatalf("Uncommitted lists the committed %q", kept)
		}
		found = found || r.Name == abandoned
	}
	if !found {
		t.Fatalf("Uncommitted misses %q: %+v", abandoned, recs)
	}
	var cleaned []string
	// Only this test's reservations: other packages' tests share the pool.
	mine := onlyNames{OmapJournal: j, names: []string{abandoned, kept}}
	_, err = journal.Sweep(ctx, journal.SweepOptions{
		Journal: mine, Kind: journal.KindVolume, OlderThan: time.Nanosecond,
		Clean: func(_ context.Context, rec journal.Record) error {
			cleaned = append(cleaned, rec.ID)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !contains(cleaned, aID) || contains(cleaned, kID) {
		t.Fatalf("Sweep cleaned %v; want %s and not %s", cleaned, aID, kID)
	}
	if _, ok, _ := j.LookupName(ctx, journal.KindVolume, abandoned); ok {
		t.Fatal("the swept reservation is still there")
	}
	if _, ok, _ := j.LookupName(ctx, journal.KindVolume, kept); !ok {
		t.Fatal("the committed reservation was swept")
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// onlyNames restricts Uncommitted to some names.
type onlyNames struct {
	*driver.OmapJournal
	names []string
}

func (o onlyNames) Uncommitted(ctx context.Context, k journal.Kind, before time.Time) ([]journal.Record, error) {
	recs, err := o.OmapJournal.Uncommitted(ctx, k, before)
	var out []journal.Record
	for _, r := range recs {
		if contains(o.names, r.Name) {
			out = append(out, r)
		}
	}
	return out, err
}

// TestOmapJournalConformance holds the omap journal to the contract
// journaltest checks for every journal, on the real cluster; Reopen is a
// new connection pool, as a restarted controller or another replica has.
func TestOmapJournalConformance(t *testing.T) {
	c := cephtest.Require(t)
	j := newJournal(t, c)
	journaltest.Run(t, journaltest.Options{
		Open:       func(*testing.T) journal.Journal { return j },
		Reopen:     func(t *testing.T, _ journal.Journal) journal.Journal { return newJournal(t, c) },
		Goroutines: 32,
	})
}

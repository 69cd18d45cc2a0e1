// Package journaltest checks that a journal.Journal keeps the contract the
// idempotency interceptor relies on. A driver that keeps its name → ID
// journal in its backend's own metadata (LVM tags, RBD omap, a cloud API's
// tags) runs Run against the real backend from a plain `go test`:
//
//	func TestJournalConformance(t *testing.T) {
//		journaltest.Run(t, journaltest.Options{
//			Open: func(t *testing.T) journal.Journal { return openMyJournal(t) },
//		})
//	}
//
// Every case uses names and IDs of its own (random, with a prefix), so Run
// can share a backend with other tests, and releases what it reserved.
package journaltest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/journal"
)

// Options says how to reach the journal under test.
type Options struct {
	// Open returns the journal under test. Each case calls it once; it may
	// return the same journal every time. Required.
	Open func(t *testing.T) journal.Journal
	// Reopen, if set, returns a new handle on the same store as j (a
	// restarted driver's view: the file reopened, a new backend
	// connection), so Run checks that records survive it. A store that
	// cannot be reopened leaves it nil and the case is not run.
	Reopen func(t *testing.T, j journal.Journal) journal.Journal
	// Volatile says reservations of KindVolume are held in memory until
	// their commit (journal.FileOptions.Volatile), so a reservation never
	// committed is gone after Reopen, and the name is free to bind anew.
	Volatile bool
	// MaxNameLen is the longest name Run stores. The CSI spec asks plugins
	// to accept names of 128 bytes; a journal that stores longer ones
	// raises it. Default 128.
	MaxNameLen int
	// NoLister says the journal does not implement journal.Lister, so
	// Sweep cannot clean its abandoned creates; without it, a journal that
	// is not a Lister fails Run.
	NoLister bool
	// Goroutines is how many concurrent Reserve calls the race case makes
	// (over a tenth as many names). Default 64.
	Goroutines int
}

// Run runs every case as a subtest of t.
func Run(t *testing.T, o Options) {
	t.Helper()
	if o.Open == nil {
		t.Fatal("journaltest: Options.Open is required")
	}
	if o.MaxNameLen <= 0 {
		o.MaxNameLen = 128
	}
	if o.Goroutines <= 0 {
		o.Goroutines = 64
	}
	t.Run("reserve_retry_commit", func(t *testing.T) { reserveRetryCommit(t, o) })
	t.Run("fingerprint_mismatch_is_already_exists", func(t *testing.T) { fingerprintMismatch(t, o) })
	t.Run("taken_id_is_refused", func(t *testing.T) { takenID(t, o) })
	t.Run("kinds_are_separate", func(t *testing.T) { kindsSeparate(t, o) })
	t.Run("commit_needs_reservation", func(t *testing.T) { commitNeedsReservation(t, o) })
	t.Run("commit_rebinds_id", func(t *testing.T) { commitRebinds(t, o) })
	t.Run("release_is_idempotent", func(t *testing.T) { release(t, o) })
	t.Run("hostile_names", func(t *testing.T) { hostileNames(t, o) })
	t.Run("bad_input_codes", func(t *testing.T) { badInput(t, o) })
	t.Run("concurrent_reserve_binds_one_id", func(t *testing.T) { concurrentReserve(t, o) })
	if !o.NoLister {
		t.Run("uncommitted_lists_only_reservations", func(t *testing.T) { uncommitted(t, o) })
	}
	if o.Reopen != nil {
		t.Run("survives_reopen", func(t *testing.T) { reopen(t, o) })
	}
}

// names hands out names and IDs unique to one case and releases every ID
// handed out when the case ends.
type names struct {
	t      *testing.T
	j      journal.Journal
	prefix string
	mu     sync.Mutex
	ids    map[journal.Kind][]string
}

func newNames(t *testing.T, j journal.Journal) *names {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	n := &names{t: t, j: j, prefix: "jt-" + hex.EncodeToString(b) + "-", ids: map[journal.Kind][]string{}}
	t.Cleanup(func() {
		ctx := context.Background()
		for k, ids := range n.ids {
			for _, id := range ids {
				if err := n.j.Release(ctx, k, id); err != nil {
					t.Errorf("journaltest cleanup: Release(%s %q): %v", k, id, err)
				}
			}
		}
	})
	return n
}

func (n *names) name(s string) string { return n.prefix + s }

func (n *names) id(k journal.Kind, s string) string {
	id := n.prefix + "id-" + s
	n.track(k, id)
	return id
}

// track has the case's cleanup release id of kind k.
func (n *names) track(k journal.Kind, id string) {
	n.mu.Lock()
	n.ids[k] = append(n.ids[k], id)
	n.mu.Unlock()
}

func reservation(k journal.Kind, name, fp, id string) journal.Reservation {
	return journal.Reservation{Kind: k, Name: name, Fingerprint: []byte(fp), ID: id}
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := status.Code(err); got != want {
		t.Errorf("%s: got %v (%v), want %v", what, got, err, want)
	}
}

func mustReserve(t *testing.T, j journal.Journal, r journal.Reservation) journal.Record {
	t.Helper()
	rec, err := j.Reserve(context.Background(), r)
	if err != nil {
		t.Fatalf("Reserve(%s %q, ID %q): %v", r.Kind, r.Name, r.ID, err)
	}
	return rec
}

func reserveRetryCommit(t *testing.T, o Options) {
	ctx := context.Background()
	j := o.Open(t)
	n := newNames(t, j)
	name, id := n.name("a"), n.id(journal.KindVolume, "a")
	before := time.Now().Add(-time.Minute)
	rec := mustReserve(t, j, reservation(journal.KindVolume, name, "fp-a", id))
	if rec.ID != id || rec.Name != name || rec.Committed || rec.Kind != journal.KindVolume {
		t.Fatalf("first Reserve: got %+v; want ID %q, name %q, not committed", rec, id, name)
	}
	if rec.Reserved.Before(before) || rec.Reserved.After(time.Now().Add(time.Minute)) {
		t.Errorf("first Reserve: Reserved = %v, want about now", rec.Reserved)
	}
	// A retry (same fingerprint, a new candidate ID) gets the first ID and
	// is never Fresh: the interceptor drops only fresh reservations after
	// a refused create, and this one may stand for a built object.
	rec = mustReserve(t, j, reservation(journal.KindVolume, name, "fp-a", n.id(journal.KindVolume, "a-retry")))
	if rec.ID != id {
		t.Fatalf("retried Reserve: got ID %q, want the first reservation's %q", rec.ID, id)
	}
	if rec.Fresh {
		t.Error("retried Reserve: Fresh = true, want false (the name was already bound)")
	}
	if err := j.Commit(ctx, journal.KindVolume, name, id, []byte("response-a")); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got, ok, err := j.LookupName(ctx, journal.KindVolume, name)
	if err != nil || !ok || !got.Committed || got.ID != id || string(got.Response) != "response-a" || string(got.Fingerprint) != "fp-a" {
		t.Fatalf("LookupName after Commit: got %+v, %v, %v; want committed %q with response and fingerprint", got, ok, err, id)
	}
	got, ok, err = j.LookupID(ctx, journal.KindVolume, id)
	if err != nil || !ok || got.Name != name || !got.Committed {
		t.Fatalf("LookupID after Commit: got %+v, %v, %v; want committed name %q", got, ok, err, name)
	}
	// A retry after the commit answers from the record.
	rec = mustReserve(t, j, reservation(journal.KindVolume, name, "fp-a", n.id(journal.KindVolume, "a-late")))
	if rec.ID != id || !rec.Committed || string(rec.Response) != "response-a" {
		t.Errorf("Reserve after Commit: got %+v; want the committed record", rec)
	}
	// Commit is idempotent: the interceptor commits again when a retry
	// ran the driver (a snapshot that became ready).
	if err := j.Commit(ctx, journal.KindVolume, name, id, []byte("response-a2")); err != nil {
		t.Fatalf("second Commit: %v", err)
	}
	if got, ok, err := j.LookupName(ctx, journal.KindVolume, name); err != nil || !ok || !got.Committed || got.ID != id {
		t.Errorf("LookupName after a second Commit: got %+v, %v, %v; want still committed under %q", got, ok, err, id)
	}
}

func fingerprintMismatch(t *testing.T, o Options) {
	j := o.Open(t)
	n := newNames(t, j)
	name := n.name("fp")
	mustReserve(t, j, reservation(journal.KindVolume, name, "fp-a", n.id(journal.KindVolume, "fp")))
	_, err := j.Reserve(context.Background(), reservation(journal.KindVolume, name, "fp-b", n.id(journal.KindVolume, "fp-b")))
	wantCode(t, "Reserve of a bound name with another fingerprint", err, codes.AlreadyExists)
	if err != nil && !strings.Contains(err.Error(), name) {
		t.Errorf("AlreadyExists error %q does not name %q", err, name)
	}
}

func takenID(t *testing.T, o Options) {
	j := o.Open(t)
	n := newNames(t, j)
	id := n.id(journal.KindVolume, "taken")
	mustReserve(t, j, reservation(journal.KindVolume, n.name("x"), "f", id))
	rec, err := j.Reserve(context.Background(), reservation(journal.KindVolume, n.name("y"), "f", id))
	if err == nil {
		t.Fatalf("Reserve of a second name with a bound ID: got %+v, want an error (IDs are unique)", rec)
	}
	wantCode(t, "Reserve of a second name with a bound ID", err, codes.Internal)
}

func kindsSeparate(t *testing.T, o Options) {
	ctx := context.Background()
	j := o.Open(t)
	n := newNames(t, j)
	name := n.name("k")
	vid := n.id(journal.KindVolume, "k")
	n.track(journal.KindSnapshot, vid)
	mustReserve(t, j, reservation(journal.KindVolume, name, "fv", vid))
	// A snapshot with the volume's name, its own fingerprint and the
	// volume's ID string: neither collides.
	if rec := mustReserve(t, j, reservation(journal.KindSnapshot, name, "fs", vid)); rec.ID != vid {
		t.Errorf("snapshot named like a volume: got ID %q, want %q", rec.ID, vid)
	}
	if err := j.Release(ctx, journal.KindVolume, vid); err != nil {
		t.Fatal(err)
	}
	if rec, ok, err := j.LookupID(ctx, journal.KindSnapshot, vid); err != nil || !ok || rec.Name != name {
		t.Errorf("releasing a volume removed the snapshot with its ID: got %+v, %v, %v", rec, ok, err)
	}
}

func commitNeedsReservation(t *testing.T, o Options) {
	j := o.Open(t)
	n := newNames(t, j)
	err := j.Commit(context.Background(), journal.KindVolume, n.name("never"), n.id(journal.KindVolume, "never"), nil)
	wantCode(t, "Commit of a name never reserved", err, codes.FailedPrecondition)
}

func commitRebinds(t *testing.T, o Options) {
	ctx := context.Background()
	j := o.Open(t)
	n := newNames(t, j)
	name, id, other := n.name("r"), n.id(journal.KindVolume, "r"), n.id(journal.KindVolume, "r2")
	taken := n.id(journal.KindVolume, "taken")
	mustReserve(t, j, reservation(journal.KindVolume, name, "f", id))
	mustReserve(t, j, reservation(journal.KindVolume, n.name("t"), "f", taken))
	wantCode(t, "Commit rebinding to an ID bound to another name", j.Commit(ctx, journal.KindVolume, name, taken, nil), codes.Internal)
	if err := j.Commit(ctx, journal.KindVolume, name, other, []byte("r")); err != nil {
		t.Fatalf("Commit under a new ID: %v", err)
	}
	if _, ok, err := j.LookupID(ctx, journal.KindVolume, id); ok || err != nil {
		t.Errorf("old ID after rebinding: got found=%v, %v; want gone", ok, err)
	}
	if rec, ok, err := j.LookupID(ctx, journal.KindVolume, other); err != nil || !ok || rec.Name != name || !rec.Committed {
		t.Errorf("new ID after rebinding: got %+v, %v, %v; want committed %q", rec, ok, err, name)
	}
}

func release(t *testing.T, o Options) {
	ctx := context.Background()
	j := o.Open(t)
	n := newNames(t, j)
	name, id := n.name("rel"), n.id(journal.KindVolume, "rel")
	mustReserve(t, j, reservation(journal.KindVolume, name, "f", id))
	if err := j.Commit(ctx, journal.KindVolume, name, id, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := j.Release(ctx, journal.KindVolume, id); err != nil {
			t.Fatalf("Release #%d: %v", i+1, err)
		}
	}
	if err := j.Release(ctx, journal.KindVolume, n.id(journal.KindVolume, "unknown")); err != nil {
		t.Errorf("Release of an unknown ID: %v, want nil", err)
	}
	if _, ok, err := j.LookupName(ctx, journal.KindVolume, name); ok || err != nil {
		t.Errorf("LookupName after Release: found=%v, %v; want gone", ok, err)
	}
	if _, ok, err := j.LookupID(ctx, journal.KindVolume, id); ok || err != nil {
		t.Errorf("LookupID after Release: found=%v, %v; want gone", ok, err)
	}
	// The name may be reserved anew, with any fingerprint, and is fresh.
	nid := n.id(journal.KindVolume, "rel-new")
	rec := mustReserve(t, j, reservation(journal.KindVolume, name, "other-fp", nid))
	if rec.ID != nid || rec.Committed {
		t.Errorf("Reserve after Release: got %+v, want a new reservation under %q", rec, nid)
	}
}

// hostileNames stores names and IDs that would do harm as file names,
// object names, tags or shell words: they must round-trip unchanged and
// stay distinct.
func hostileNames(t *testing.T, o Options) {
	ctx := context.Background()
	j := o.Open(t)
	n := newNames(t, j)
	long := n.name(strings.Repeat("x", max(0, o.MaxNameLen-len(n.name("")))))
	hostile := []string{
		"../../etc/passwd", "/abs/path", "a\x00b", "名前", "$(rm -rf /)", "`id`", "a b\tc\nd",
		`"quoted" 'name'`, "-rf", ".", "..", "csi-vol;reboot", "UPPER", "upper", long,
	}
	for i, h := range hostile {
		name := h
		if h != long {
			name = n.name(h)
		}
		if len(name) > o.MaxNameLen {
			name = name[:o.MaxNameLen]
		}
		id := n.id(journal.KindVolume, fmt.Sprintf("../%d '$x'", i))
		rec := mustReserve(t, j, reservation(journal.KindVolume, name, "f\x00\n", id))
		if rec.ID != id {
			t.Errorf("Reserve %q: got ID %q, want %q", name, rec.ID, id)
		}
		if got, ok, err := j.LookupID(ctx, journal.KindVolume, id); err != nil || !ok || got.Name != name || string(got.Fingerprint) != "f\x00\n" {
			t.Errorf("LookupID %q: got %+v, %v, %v; want name %q unchanged", id, got, ok, err, name)
		}
		if got, ok, err := j.LookupName(ctx, journal.KindVolume, name); err != nil || !ok || got.ID != id {
			t.Errorf("LookupName %q: got %+v, %v, %v; want ID %q", name, got, ok, err, id)
		}
	}
}

func badInput(t *testing.T, o Options) {
	ctx := context.Background()
	j := o.Open(t)
	n := newNames(t, j)
	_, err := j.Reserve(ctx, reservation(journal.KindVolume, "", "f", n.id(journal.KindVolume, "e")))
	wantCode(t, "Reserve with an empty name", err, codes.InvalidArgument)
	_, err = j.Reserve(ctx, reservation(journal.KindVolume, n.name("e"), "f", ""))
	wantCode(t, "Reserve with an empty ID", err, codes.InvalidArgument)
	_, err = j.Reserve(ctx, journal.Reservation{Kind: 99, Name: n.name("k"), ID: n.id(journal.KindVolume, "k")})
	wantCode(t, "Reserve of an unknown kind", err, codes.InvalidArgument)
	_, _, err = j.LookupID(ctx, journal.KindVolume, strings.Repeat("i", journal.MaxKeyLen+1))
	wantCode(t, "LookupID of an oversized ID", err, codes.InvalidArgument)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = j.Reserve(cctx, reservation(journal.KindVolume, n.name("c"), "f", n.id(journal.KindVolume, "c")))
	wantCode(t, "Reserve with a canceled context", err, codes.Canceled)
}

// concurrentReserve has many goroutines reserve a few names with distinct
// candidate IDs at once (as retries on two controller replicas would):
// each name ends bound to one ID and every caller is told that ID.
func concurrentReserve(t *testing.T, o Options) {
	ctx := context.Background()
	j := o.Open(t)
	n := newNames(t, j)
	nnames := max(1, o.Goroutines/10)
	ids := make([]string, o.Goroutines)
	for g := range ids {
		ids[g] = n.id(journal.KindVolume, fmt.Sprint("g", g))
	}
	var mu sync.Mutex
	got := make([]map[string]bool, nnames)
	for i := range got {
		got[i] = map[string]bool{}
	}
	var fresh = make([]int, nnames)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range o.Goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			k := g % nnames
			rec, err := j.Reserve(ctx, reservation(journal.KindVolume, n.name(fmt.Sprint("race-", k)), "f", ids[g]))
			if err != nil {
				t.Errorf("concurrent Reserve: %v", err)
				return
			}
			mu.Lock()
			got[k][rec.ID] = true
			if rec.Fresh {
				fresh[k]++
			}
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	for k := range nnames {
		if len(got[k]) != 1 {
			t.Errorf("name %d: callers were told IDs %v, want exactly one", k, keys(got[k]))
		}
		if fresh[k] > 1 {
			t.Errorf("name %d: %d callers were told Fresh, want at most one", k, fresh[k])
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func uncommitted(t *testing.T, o Options) {
	ctx := context.Background()
	j := o.Open(t)
	l, ok := j.(journal.Lister)
	if !ok {
		t.Fatalf("%T does not implement journal.Lister, so Sweep cannot clean its abandoned creates; implement it or set Options.NoLister", j)
	}
	n := newNames(t, j)
	open, done := n.name("open"), n.name("done")
	oid, did := n.id(journal.KindVolume, "open"), n.id(journal.KindVolume, "done")
	mustReserve(t, j, reservation(journal.KindVolume, open, "f", oid))
	mustReserve(t, j, reservation(journal.KindVolume, done, "f", did))
	if err := j.Commit(ctx, journal.KindVolume, done, did, nil); err != nil {
		t.Fatal(err)
	}
	recs, err := l.Uncommitted(ctx, journal.KindVolume, time.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("Uncommitted: %v", err)
	}
	var mine []journal.Record
	for _, r := range recs {
		if strings.HasPrefix(r.Name, n.prefix) {
			mine = append(mine, r)
		}
		if r.Committed {
			t.Errorf("Uncommitted listed committed %q", r.Name)
		}
	}
	if len(mine) != 1 || mine[0].Name != open || mine[0].ID != oid {
		t.Errorf("Uncommitted (this case's records): got %+v, want only %q", mine, open)
	}
	// reservedBefore is a cut-off: a reservation made after it is not listed.
	recs, err = l.Uncommitted(ctx, journal.KindVolume, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatalf("Uncommitted(an hour ago): %v", err)
	}
	for _, r := range recs {
		if r.Name == open {
			t.Errorf("Uncommitted(an hour ago) listed %q, reserved just now", open)
		}
	}
}

func reopen(t *testing.T, o Options) {
	ctx := context.Background()
	j := o.Open(t)
	n := newNames(t, j)
	cname, cid := n.name("committed"), n.id(journal.KindVolume, "committed")
	rname, rid := n.name("reserved"), n.id(journal.KindVolume, "reserved")
	mustReserve(t, j, reservation(journal.KindVolume, cname, "fc", cid))
	if err := j.Commit(ctx, journal.KindVolume, cname, cid, []byte("resp")); err != nil {
		t.Fatal(err)
	}
	mustReserve(t, j, reservation(journal.KindVolume, rname, "fr", rid))
	j2 := o.Reopen(t, j)
	n.j = j2 // release through the live handle
	rec, err := j2.Reserve(ctx, reservation(journal.KindVolume, cname, "fc", n.id(journal.KindVolume, "c-retry")))
	if err != nil || rec.ID != cid || !rec.Committed || string(rec.Response) != "resp" {
		t.Errorf("committed record after reopen: got %+v, %v; want committed %q with its response", rec, err, cid)
	}
	if o.Volatile {
		// A create in flight at a crash: its retry gets a new ID.
		if _, ok, err := j2.LookupID(ctx, journal.KindVolume, rid); ok || err != nil {
			t.Errorf("volatile reservation's ID after reopen: LookupID found it (%v), want it gone", err)
		}
		retry := n.id(journal.KindVolume, "r-retry")
		rec, err = j2.Reserve(ctx, reservation(journal.KindVolume, rname, "fr", retry))
		if err != nil || rec.ID != retry || rec.Committed || !rec.Fresh {
			t.Errorf("volatile reservation after reopen: got %+v, %v; want a fresh one of %q", rec, err, retry)
		}
	} else {
		rec, err = j2.Reserve(ctx, reservation(journal.KindVolume, rname, "fr", n.id(journal.KindVolume, "r-retry")))
		if err != nil || rec.ID != rid || rec.Committed || rec.Fresh {
			t.Errorf("reservation after reopen: got %+v, %v; want the uncommitted %q, not fresh", rec, err, rid)
		}
	}
	_, err = j2.Reserve(ctx, reservation(journal.KindVolume, rname, "other", n.id(journal.KindVolume, "r-other")))
	wantCode(t, "Reserve with another fingerprint after reopen", err, codes.AlreadyExists)
}

package driver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ceph/go-ceph/rados"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/journal"
)

// JournalNamespace is the RADOS namespace, inside each pool the driver
// serves, that holds its journal. rbd never writes there, so `rbd ls` and
// the journal cannot collide.
const JournalNamespace = "csikit-journal"

// OmapJournal is an journal.Journal (and journal.Lister) kept in
// RADOS omap objects, so every controller replica sees the same
// reservations. Layout, per kind k ("volume", "snapshot", "group"):
//
//	k.name.<sha256(name)>   omap: name, id, fp, reserved (unix ns), committed, response
//	k.id.<sha256(id)>       omap: name
//
// Names and IDs are hashed into object names, so no request string ever
// becomes (part of) an object name unchecked. Every object is created with
// an exclusive create in the same write operation that fills its omap, so
// a record appears whole or not at all, and of two processes reserving one
// name exactly one creates the record; the other reads it. The ID object
// is created first: a crash between the two leaves only an ID object
// pointing at a name whose record does not point back, which every read
// ignores.
//
// Every uncommitted reservation carries a lease (omap "lease", unix ns of
// its expiry, and "holder", "create" or "sweep"): Reserve takes it for the
// create it serves, the create renews it while it runs (Hold), and the
// sweep of abandoned creates (Sweep) may only take over a reservation whose
// lease expired, with a write conditioned on the object's version being the
// one it read, so a retry served meanwhile by another replica (which renews
// or commits, changing the version) makes the sweep's claim fail. A claimed
// reservation's data becomes "sweep:<ID>:<claim token>", so the guarded writes of the
// create it was taken from (renew, commit) fail from then on.
type OmapJournal struct {
	open func(ctx context.Context) (*rados.IOContext, func(), error)
	// private opens an I/O context of the caller's own, for reads whose
	// object version (rados_get_last_version) must not be another
	// goroutine's.
	private func(ctx context.Context) (*rados.IOContext, func(), error)
	lease   time.Duration
	creds   Credentials
	pool    string
}

// DefaultCreateLease is how long a reservation stays leased to the create
// that made or retried it without being renewed (Options.CreateLease).
const DefaultCreateLease = 10 * time.Minute

// NewOmapJournal returns the journal in pool, reached through conns with
// creds, with leases of DefaultCreateLease.
func NewOmapJournal(conns *ConnPool, creds Credentials, pool string) *OmapJournal {
	return &OmapJournal{
		open: func(ctx context.Context) (*rados.IOContext, func(), error) {
			return conns.IOContext(ctx, creds, pool, JournalNamespace)
		},
		private: func(ctx context.Context) (*rados.IOContext, func(), error) {
			conn, done, err := conns.Conn(ctx, creds)
			if err != nil {
				return nil, nil, err
			}
			io, err := conn.OpenIOContext(pool)
			if err != nil {
				done()
				return nil, nil, backendError(err, "open pool "+pool)
			}
			io.SetNamespace(JournalNamespace)
			return io, func() { io.Destroy(); done() }, nil
		},
		lease: DefaultCreateLease, creds: creds, pool: pool,
	}
}

// WithLease returns a copy of j whose creates take leases of d (d <= 0:
// DefaultCreateLease).
func (j *OmapJournal) WithLease(d time.Duration) *OmapJournal {
	if d <= 0 {
		d = DefaultCreateLease
	}
	c := *j
	c.lease = d
	return &c
}

// Lease holders.
const (
	holderCreate = "create"
	holderSweep  = "sweep"
)

// sweepData is the name object's data once a sweep claimed it with token
// (its own, so only that sweep releases it).
func sweepData(id, token string) []byte { return []byte("sweep:" + id + ":" + token + "\n") }

func (j *OmapJournal) leaseVals(holder string) map[string][]byte {
	return map[string][]byte{"lease": []byte(itoa(time.Now().Add(j.lease).UnixNano())), "holder": []byte(holder)}
}

// leaseExpiry is when m's lease ends; a record older than leases ends one
// lease after it was reserved.
func (j *OmapJournal) leaseExpiry(m map[string][]byte) time.Time {
	if ns, err := strconv.ParseInt(string(m["lease"]), 10, 64); err == nil {
		return time.Unix(0, ns)
	}
	ns, _ := strconv.ParseInt(string(m["reserved"]), 10, 64)
	return time.Unix(0, ns).Add(j.lease)
}

func errSwept(k journal.Kind, name string) error {
	return status.Errorf(codes.Aborted, "journal: the reservation of %s name %q was abandoned long ago and is being removed by the sweep of abandoned creates; retry, and the create starts afresh", k, name)
}

var (
	_ journal.Journal = (*OmapJournal)(nil)
	_ journal.Lister  = (*OmapJournal)(nil)
)

func kindPrefix(k journal.Kind) string {
	switch k {
	case journal.KindVolume:
		return "volume"
	case journal.KindSnapshot:
		return "snapshot"
	}
	return "group"
}

func hashed(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func nameObject(k journal.Kind, name string) string {
	return kindPrefix(k) + ".name." + hashed(name)
}
func idObject(k journal.Kind, id string) string { return kindPrefix(k) + ".id." + hashed(id) }

func checkKind(ctx context.Context, k journal.Kind, s string) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	if k < journal.KindVolume || k > journal.KindGroupSnapshot {
		return status.Errorf(codes.InvalidArgument, "journal: unknown kind %d", uint8(k))
	}
	if s == "" {
		return status.Error(codes.InvalidArgument, "journal: empty name or ID")
	}
	if len(s) > journal.MaxKeyLen {
		return status.Errorf(codes.InvalidArgument, "journal: name or ID of %d bytes, want at most %d", len(s), journal.MaxKeyLen)
	}
	return nil
}

func journalErr(err error, what string) error { return backendError(err, "journal: "+what) }

// readOmap returns an object's omap, or ok=false if the object is missing.
func readOmap(io *rados.IOContext, oid string) (map[string][]byte, bool, error) {
	m, _, ok, err := readOmapPrefix(io, oid, "")
	return m, ok, err
}

// omapPage is how many omap entries one read returns. An object with more
// (the access object of a volume staged on many nodes) is read in pages.
const omapPage = 512

// omapRereads bounds how often readOmapPrefix starts over because the
// object was written between two of its pages.
const omapRereads = 8

// readOmapPrefix returns the omap entries of oid whose keys start with
// prefix ("": all), all of one version of the object, and that version;
// ok=false if the object is missing. The first read covers an object of up
// to omapPage entries in one step, as before; a larger one is read on
// from the last key returned, each further page asserting the version the
// first one saw, and read again from the start if it was written
// meanwhile, so the result is never a mix of two versions.
func readOmapPrefix(io *rados.IOContext, oid, prefix string) (map[string][]byte, uint64, bool, error) {
	for range omapRereads {
		m, ver, ok, again, err := readOmapOnce(io, oid, prefix)
		if !again {
			return m, ver, ok, err
		}
	}
	return nil, 0, false, status.Errorf(codes.Aborted, "omap of %s changed while it was read, %d times over; retry", oid, omapRereads)
}

// readOmapOnce is one attempt of readOmapPrefix; again reports that the
// object changed between two pages.
func readOmapOnce(io *rados.IOContext, oid, prefix string) (out map[string][]byte, ver uint64, ok, again bool, err error) {
	out = map[string][]byte{}
	after := ""
	for first := true; ; first = false {
		op := rados.CreateReadOp()
		if first {
			op.AssertExists()
		} else {
			op.AssertVersion(ver)
		}
		step := op.GetOmapValues(after, prefix, omapPage)
		err := op.Operate(io, oid, rados.OperationNoFlag)
		if err != nil {
			op.Release()
			switch {
			case first && errors.Is(err, rados.ErrNotFound):
				return nil, 0, false, false, nil
			case !first && (raced(err) || errors.Is(err, rados.ErrNotFound)):
				return nil, 0, false, true, nil
			}
			return nil, 0, false, false, err
		}
		if first {
			if ver, err = io.GetLastVersion(); err != nil {
				op.Release()
				return nil, 0, false, false, err
			}
		}
		for {
			kv, err := step.Next()
			if err != nil {
				op.Release()
				return nil, 0, false, false, err
			}
			if kv == nil {
				break
			}
			out[kv.Key] = kv.Value
			after = kv.Key
		}
		more := step.More()
		op.Release()
		if !more {
			return out, ver, true, false, nil
		}
	}
}

// createWithOmap creates oid exclusively with the given omap, atomically.
func createWithOmap(io *rados.IOContext, oid string, vals map[string][]byte) error {
	op := rados.CreateWriteOp()
	defer op.Release()
	op.Create(rados.CreateExclusive)
	op.SetOmap(vals)
	return op.Operate(io, oid, rados.OperationNoFlag)
}

// idData is the name object's data: the ID it binds, so a write can be
// guarded on it with one compare-extent step.
func idData(id string) []byte { return []byte(id + "\n") }

// guarded runs the steps add puts into a write op on the name object of a
// record that must still bind id; it reports false if the record is gone or
// binds another ID.
func guarded(io *rados.IOContext, nobj, id string, add func(*rados.WriteOp)) (bool, error) {
	return guardedData(io, nobj, idData(id), add)
}

// guardedData is guarded with the data the object must hold.
func guardedData(io *rados.IOContext, nobj string, data []byte, add func(*rados.WriteOp)) (bool, error) {
	op := rados.CreateWriteOp()
	defer op.Release()
	op.CmpExt(data, 0)
	add(op)
	err := op.Operate(io, nobj, rados.OperationNoFlag)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, rados.ErrNotFound) || cephErrno(err) >= 4095: // -MAX_ERRNO-offset: mismatch
		return false, nil
	}
	return false, err
}

func decodeRecord(k journal.Kind, m map[string][]byte) journal.Record {
	ns, _ := strconv.ParseInt(string(m["reserved"]), 10, 64)
	rec := journal.Record{
		Kind: k, Name: string(m["name"]), ID: string(m["id"]),
		Fingerprint: m["fp"], Committed: string(m["committed"]) == "1",
		Reserved: time.Unix(0, ns),
	}
	if rec.Committed {
		rec.Response = m["response"]
	}
	return rec
}

// Reserve implements journal.Journal.
func (j *OmapJournal) Reserve(ctx context.Context, r journal.Reservation) (journal.Record, error) {
	if err := checkKind(ctx, r.Kind, r.Name); err != nil {
		return journal.Record{}, err
	}
	if r.ID == "" {
		return journal.Record{}, status.Errorf(codes.InvalidArgument, "journal: reservation of %s %q has an empty ID", r.Kind, r.Name)
	}
	io, done, err := j.open(ctx)
	if err != nil {
		return journal.Record{}, err
	}
	defer done()
	nobj, iobj := nameObject(r.Kind, r.Name), idObject(r.Kind, r.ID)
	// The ID first (see the type's doc), exclusively: an ID bound to
	// another name is a broken NewID.
	if err := createWithOmap(io, iobj, map[string][]byte{"name": []byte(r.Name)}); err != nil {
		if !errors.Is(err, rados.ErrObjectExists) {
			return journal.Record{}, journalErr(err, "reserve ID")
		}
		m, ok, rerr := readOmap(io, iobj)
		if rerr != nil {
			return journal.Record{}, journalErr(rerr, "read ID")
		}
		if ok && string(m["name"]) != r.Name {
			if owner, bound, _ := readOmap(io, nameObject(r.Kind, string(m["name"]))); bound && string(owner["id"]) == r.ID {
				return journal.Record{}, status.Errorf(codes.Internal,
					"journal: %s ID %q for name %q is already bound to name %q; the driver's NewID must return distinct IDs for distinct names",
					r.Kind, r.ID, r.Name, m["name"])
			}
			// A leftover of a crash between the two creates: take it over.
			if err := io.SetOmap(iobj, map[string][]byte{"name": []byte(r.Name)}); err != nil {
				return journal.Record{}, journalErr(err, "reserve ID")
			}
		}
	}
	now := time.Now()
	op := rados.CreateWriteOp()
	op.Create(rados.CreateExclusive)
	op.WriteFull(idData(r.ID)) // for the one-op guarded commit and release
	vals := j.leaseVals(holderCreate)
	vals["name"], vals["id"], vals["fp"] = []byte(r.Name), []byte(r.ID), r.Fingerprint
	vals["reserved"] = []byte(itoa(now.UnixNano()))
	op.SetOmap(vals)
	err = op.Operate(io, nobj, rados.OperationNoFlag)
	op.Release()
	if err == nil {
		// Fresh: this call made it, so the idempotency layer drops it if
		// the driver refuses the request (InvalidArgument, OutOfRange...).
		return journal.Record{Kind: r.Kind, Name: r.Name, ID: r.ID, Fingerprint: slices.Clone(r.Fingerprint), Reserved: time.Unix(0, now.UnixNano()), Fresh: true}, nil
	}
	// Our fresh ID object is now unused whatever happened.
	_ = io.Delete(iobj)
	if !errors.Is(err, rados.ErrObjectExists) {
		return journal.Record{}, journalErr(err, "reserve name")
	}
	// Another process reserved the name first: its record wins.
	m, ok, err := readOmap(io, nobj)
	if err != nil {
		return journal.Record{}, journalErr(err, "read reservation")
	}
	if !ok {
		return journal.Record{}, status.Errorf(codes.Aborted, "journal: %s name %q was reserved and released concurrently; retry", r.Kind, r.Name)
	}
	rec, err := j.existing(r, m)
	if err != nil || rec.Committed {
		return rec, err
	}
	// A retry of an uncommitted create: it serves the create now, so it
	// takes the lease (unless the sweep took the reservation over).
	if err := j.renew(io, r.Kind, rec.Name, rec.ID); err != nil {
		return journal.Record{}, err
	}
	return rec, nil
}

// renew extends the lease of the uncommitted reservation of name, which
// must still bind id: Aborted if the sweep claimed it, or if it is gone or
// binds another ID (the CO's retry then starts afresh). A reservation
// committed meanwhile needs no lease: nil.
func (j *OmapJournal) renew(io *rados.IOContext, k journal.Kind, name, id string) error {
	nobj := nameObject(k, name)
	ok, err := guarded(io, nobj, id, func(op *rados.WriteOp) { op.SetOmap(j.leaseVals(holderCreate)) })
	if err != nil {
		return journalErr(err, "renew lease")
	}
	if ok {
		return nil
	}
	m, found, err := readOmap(io, nobj)
	switch {
	case err != nil:
		return journalErr(err, "read reservation")
	case found && string(m["id"]) == id && string(m["holder"]) == holderSweep:
		return errSwept(k, name)
	case found && string(m["id"]) == id && string(m["committed"]) == "1":
		return nil // committed meanwhile: nothing to hold
	}
	return status.Errorf(codes.Aborted, "journal: the reservation of %s name %q for ID %q was released meanwhile; retry", k, name, id)
}

// Hold renews the lease of the create of name under id: a create that
// runs for longer than the lease calls it (Driver does, every third of
// the lease) so the sweep never takes it over. An error means the lease
// is lost (Aborted): whatever the create made must be undone.
func (j *OmapJournal) Hold(ctx context.Context, kind journal.Kind, name, id string) error {
	if err := checkKind(ctx, kind, name); err != nil {
		return err
	}
	io, done, err := j.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	return j.renew(io, kind, name, id)
}

func (j *OmapJournal) existing(r journal.Reservation, m map[string][]byte) (journal.Record, error) {
	rec := decodeRecord(r.Kind, m)
	if string(rec.Fingerprint) != string(r.Fingerprint) {
		return journal.Record{}, status.Errorf(codes.AlreadyExists,
			"%s name %q is already used by %s %q created with different parameters; use a new name or repeat the original request",
			r.Kind, r.Name, r.Kind, rec.ID)
	}
	return rec, nil
}

// Commit implements journal.Journal.
func (j *OmapJournal) Commit(ctx context.Context, kind journal.Kind, name, id string, response []byte) error {
	if err := checkKind(ctx, kind, name); err != nil {
		return err
	}
	if err := checkKind(ctx, kind, id); err != nil {
		return err
	}
	io, done, err := j.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	nobj := nameObject(kind, name)
	// The usual commit, of the reserved ID: one guarded write.
	vals := map[string][]byte{"committed": []byte("1"), "response": response}
	if ok, err := guarded(io, nobj, id, func(op *rados.WriteOp) { op.SetOmap(vals) }); err != nil {
		return journalErr(err, "commit")
	} else if ok {
		return nil
	}
	m, ok, err := readOmap(io, nobj)
	if err != nil {
		return journalErr(err, "read reservation")
	}
	if !ok {
		return status.Errorf(codes.FailedPrecondition, "journal: %s name %q has no reservation to commit", kind, name)
	}
	old := string(m["id"])
	if id == old {
		// The guard failed on the ID it holds: the sweep claimed it.
		if string(m["committed"]) == "1" {
			return nil
		}
		return errSwept(kind, name)
	}
	if err := createWithOmap(io, idObject(kind, id), map[string][]byte{"name": []byte(name)}); err != nil {
		if !errors.Is(err, rados.ErrObjectExists) {
			return journalErr(err, "bind ID")
		}
		if o, _, _ := readOmap(io, idObject(kind, id)); string(o["name"]) != name {
			return status.Errorf(codes.Internal, "journal: %s ID %q for name %q is already bound to name %q", kind, id, name, o["name"])
		}
	}
	// Rebind, guarded on the old ID: a concurrent Release or sweep wins.
	ok, err = guarded(io, nobj, old, func(op *rados.WriteOp) {
		op.WriteFull(idData(id))
		op.SetOmap(map[string][]byte{"committed": []byte("1"), "response": response, "id": []byte(id)})
	})
	if err != nil {
		return journalErr(err, "commit")
	}
	if !ok {
		return status.Errorf(codes.Aborted, "journal: the reservation of %s name %q changed while committing %q; retry", kind, name, id)
	}
	_ = io.Delete(idObject(kind, old))
	return nil
}

// LookupName implements journal.Journal.
func (j *OmapJournal) LookupName(ctx context.Context, kind journal.Kind, name string) (journal.Record, bool, error) {
	if err := checkKind(ctx, kind, name); err != nil {
		return journal.Record{}, false, err
	}
	io, done, err := j.open(ctx)
	if err != nil {
		return journal.Record{}, false, err
	}
	defer done()
	m, ok, err := readOmap(io, nameObject(kind, name))
	if err != nil {
		return journal.Record{}, false, journalErr(err, "read reservation")
	}
	if !ok {
		return journal.Record{}, false, nil
	}
	return decodeRecord(kind, m), true, nil
}

// lookupID reads the record bound to id with io.
func lookupID(io *rados.IOContext, kind journal.Kind, id string) (journal.Record, bool, error) {
	m, ok, err := readOmap(io, idObject(kind, id))
	if err != nil || !ok {
		return journal.Record{}, false, err
	}
	rm, ok, err := readOmap(io, nameObject(kind, string(m["name"])))
	if err != nil || !ok {
		return journal.Record{}, false, err
	}
	rec := decodeRecord(kind, rm)
	if rec.ID != id {
		return journal.Record{}, false, nil
	}
	return rec, true, nil
}

// LookupID implements journal.Journal.
func (j *OmapJournal) LookupID(ctx context.Context, kind journal.Kind, id string) (journal.Record, bool, error) {
	if err := checkKind(ctx, kind, id); err != nil {
		return journal.Record{}, false, err
	}
	io, done, err := j.open(ctx)
	if err != nil {
		return journal.Record{}, false, err
	}
	defer done()
	rec, ok, err := lookupID(io, kind, id)
	if err != nil {
		return journal.Record{}, false, journalErr(err, "look up ID")
	}
	return rec, ok, nil
}

// Release implements journal.Journal.
func (j *OmapJournal) Release(ctx context.Context, kind journal.Kind, id string) error {
	if err := checkKind(ctx, kind, id); err != nil {
		return err
	}
	io, done, err := j.open(ctx)
	if err != nil {
		return err
	}
	defer done()
	m, ok, err := readOmap(io, idObject(kind, id))
	if err != nil {
		return journalErr(err, "look up ID")
	}
	if !ok {
		return nil
	}
	// The name goes only if it still binds id: one guarded remove.
	if _, err := guarded(io, nameObject(kind, string(m["name"])), id, func(op *rados.WriteOp) { op.Remove() }); err != nil {
		return journalErr(err, "release name")
	}
	if err := io.Delete(idObject(kind, id)); err != nil && !errors.Is(err, rados.ErrNotFound) {
		return journalErr(err, "release ID")
	}
	return nil
}

// journalReaders is how many journal records Uncommitted reads at once.
const journalReaders = 16

// Uncommitted implements journal.Lister. It lists the journal's
// namespace, which holds nothing but journal objects.
func (j *OmapJournal) Uncommitted(ctx context.Context, kind journal.Kind, reservedBefore time.Time) ([]journal.Record, error) {
	if err := checkKind(ctx, kind, "-"); err != nil {
		return nil, err
	}
	io, done, err := j.open(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	prefix := kindPrefix(kind) + ".name."
	var oids []string
	err = io.ListObjects(func(oid string) {
		if strings.HasPrefix(oid, prefix) {
			oids = append(oids, oid)
		}
	})
	if err != nil {
		return nil, journalErr(err, "list")
	}
	// One read per record, several in flight: the sweep reads the whole
	// journal, and one round trip at a time made that 4 ms per record.
	recs := make([]journal.Record, len(oids))
	keep := make([]bool, len(oids))
	errs := make([]error, len(oids))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(journalReaders, len(oids)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(oids) && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				m, ok, err := readOmap(io, oids[i])
				if err != nil {
					errs[i] = journalErr(err, fmt.Sprintf("read %s", oids[i]))
					continue
				}
				if ok {
					recs[i] = decodeRecord(kind, m)
					keep[i] = !recs[i].Committed && recs[i].Reserved.Before(reservedBefore)
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	var out []journal.Record
	for i := range oids {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if keep[i] {
			out = append(out, recs[i])
		}
	}
	slices.SortFunc(out, func(a, b journal.Record) int { return a.Reserved.Compare(b.Reserved) })
	return out, nil
}

// sweepPause, when set (tests), runs after the sweep read a reservation it
// found abandoned and before it claims it.
var sweepPause func(name string)

// Sweep removes the abandoned creates of kind: reservations never
// committed, made more than olderThan ago, whose lease expired. Each is
// first claimed with one write conditioned on the object's version being
// the one just read (so a retry another replica served meanwhile, which
// renewed the lease or committed, wins), then clean removes what the
// create may have made, then the claimed reservation is released. It
// returns how many were released, and the errors of the others. Unlike
// journal.Sweep, it needs no lock table: the claim works across
// replicas.
func (j *OmapJournal) Sweep(ctx context.Context, kind journal.Kind, olderThan time.Duration, clean func(context.Context, journal.Record) error) (int, error) {
	recs, err := j.Uncommitted(ctx, kind, time.Now().Add(-olderThan))
	if err != nil {
		return 0, err
	}
	io, done, err := j.private(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	n := 0
	var errs []error
	for _, r := range recs {
		token, err := j.claim(io, kind, r.Name, r.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if token == "" {
			continue
		}
		if err := clean(ctx, r); err != nil {
			errs = append(errs, fmt.Errorf("clean %s %q (name %q): %w", kind, r.ID, r.Name, err))
			continue // the claim expires; the next sweep tries again
		}
		ok, err := guardedData(io, nameObject(kind, r.Name), sweepData(r.ID, token), func(op *rados.WriteOp) { op.Remove() })
		if err != nil {
			errs = append(errs, journalErr(err, "release swept name"))
			continue
		}
		if !ok {
			continue // the claim expired and another sweep took it over
		}
		if err := io.Delete(idObject(kind, r.ID)); err != nil && !errors.Is(err, rados.ErrNotFound) {
			errs = append(errs, journalErr(err, "release swept ID"))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// claim takes the reservation of name over for the sweep if it still binds
// id, is uncommitted and its lease (a create's, or an earlier sweep's)
// expired, and nobody wrote it between the read and the claim; it returns
// the claim's token, or "" if it did not claim. io must be the caller's
// own (see private).
func (j *OmapJournal) claim(io *rados.IOContext, kind journal.Kind, name, id string) (string, error) {
	nobj := nameObject(kind, name)
	m, ok, err := readOmap(io, nobj)
	if err != nil {
		return "", journalErr(err, "read reservation")
	}
	if !ok {
		return "", nil
	}
	ver, err := io.GetLastVersion()
	if err != nil {
		return "", journalErr(err, "version of reservation")
	}
	if string(m["id"]) != id || string(m["committed"]) == "1" || time.Now().Before(j.leaseExpiry(m)) {
		return "", nil
	}
	if sweepPause != nil {
		sweepPause(name)
	}
	token := journal.RandomID("")
	op := rados.CreateWriteOp()
	defer op.Release()
	op.AssertVersion(ver)
	op.WriteFull(sweepData(id, token))
	op.SetOmap(j.leaseVals(holderSweep))
	err = op.Operate(io, nobj, rados.OperationNoFlag)
	switch n := cephErrno(err); {
	case err == nil:
		return token, nil
	case n == 34 || n == 75 || errors.Is(err, rados.ErrNotFound): // ERANGE, EOVERFLOW: written meanwhile
		return "", nil
	}
	return "", journalErr(err, "claim reservation")
}

package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/internal/kvlog"
)

// FileOptions configures OpenFile.
type FileOptions struct {
	// LockTimeout bounds the wait for another process that has the file
	// open (the file is locked while open). Default 5s.
	LockTimeout time.Duration
	// Mode is the file's permission bits when it is created. Default 0600.
	Mode os.FileMode
	// Volatile lists the kinds whose reservations are held in memory
	// until their Commit, which then writes the reservation and the
	// commit in one append and one flush: a create waits for one flush
	// instead of two. Committed records, and releases, are as durable as
	// ever; what is given up is the reservation of a create in flight at a
	// crash. Such a create never answered, and its retry gets a new ID, so
	// whatever it had made under the old ID is named by no record: a
	// driver that sets Volatile must remove, at start and before it
	// serves, every backend object of these kinds that no committed
	// record (and no durable reservation from before the option was set)
	// names — examples/hostpath lists its three data directories. Sweep
	// still cleans the volatile reservations a running process holds.
	// Use it only where the backend's objects can be listed cheaply and
	// completely. KindFence cannot be volatile: a reserved fence record
	// stands for a node treated as fenced.
	Volatile []Kind
}

// File is a crash-safe Journal in one file, for single-node drivers.
//
// The file is an append-only log of checksummed batches over an in-memory
// index: every change is flushed (fdatasync) before the call returns (a
// volatile reservation, FileOptions.Volatile, is written only with its
// commit), and
// after a crash or SIGKILL at any instant the file replays to the state
// before or after each change, never a torn one. Concurrent writers share
// one append and one flush (group commit): a lone caller commits at once,
// callers that arrive during a commit are all committed by the next one.
// The file is preallocated in 4 MiB steps and compacted when it outgrows
// its live data, so it stays a few times the size of what it holds; its
// size has no limit but memory for the keys (see MaxKVValue for what one
// write may hold). A full disk fails only the writes that need more space;
// a failed write to the file is reported by Err until the journal
// recovers. Memory holds the keys and where each value is in the file;
// reads of values are served from the file, which is to say from the
// page cache as a rule (at 100,000 volumes the values were two thirds of
// the heap). Names and IDs are opaque keys inside the file,
// never file names. Only one process may have the file open. It works on
// Linux, macOS and the BSDs; elsewhere OpenFile fails (use
// Memory, or a Journal on the storage backend).
type File struct {
	db       *kvlog.DB
	watchErr atomic.Pointer[error] // a KV.Watch that could not read the values

	// volatile[k] says kind k's reservations are held in memory
	// (FileOptions.Volatile); pending holds them until their commit.
	volatile [lastKind + 1]bool
	pmu      sync.Mutex
	pending  [lastKind + 1]pendingSet
}

// pendingSet is one kind's volatile reservations, by name and by ID.
type pendingSet struct {
	names map[string]Record
	ids   map[string]string // ID → name
}

var bucketNames = map[Kind][2]string{
	KindVolume:        {"volume/names", "volume/ids"},
	KindSnapshot:      {"snapshot/names", "snapshot/ids"},
	KindGroupSnapshot: {"group-snapshot/names", "group-snapshot/ids"},
	KindFence:         {"fence/names", "fence/ids"},
}

// OpenFile opens or creates the journal file at path. Close it when
// done. A file damaged in the middle (not merely torn at the end by a
// crash) is refused with an error rather than opened without its records.
func OpenFile(path string, o FileOptions) (*File, error) {
	j := &File{}
	for _, k := range o.Volatile {
		if !k.valid() || k == KindFence {
			return nil, fmt.Errorf("journal: open journal: %s reservations cannot be volatile", k)
		}
		j.volatile[k] = true
		j.pending[k] = pendingSet{names: map[string]Record{}, ids: map[string]string{}}
	}
	db, err := kvlog.Open(path, kvlog.Options{LockTimeout: o.LockTimeout, Mode: o.Mode})
	if err != nil {
		return nil, fmt.Errorf("journal: open journal: %w", err)
	}
	j.db = db
	return j, nil
}

// Close closes the file after the commit in progress. Calls after Close
// fail.
func (j *File) Close() error { return j.db.Close() }

// Err implements HealthReporter. It returns nil while the journal takes
// writes. After a write or flush to the file failed (an I/O error: what
// reached the disk is then unknown) the journal refuses writes and Err
// returns FailedPrecondition naming the failure, until the journal
// recovers: every write after a second's pause tries to, by rewriting the
// file from memory, which holds exactly what was acknowledged; reopening
// the file (restarting the driver) recovers too, with no hand editing.
// Running out of disk space does not poison the journal: the write that
// needed the space fails, the next ones work once there is space. After
// Close, Err returns FailedPrecondition too.
func (j *File) Err() error {
	if err := j.watchErr.Load(); err != nil {
		return status.Errorf(codes.FailedPrecondition, "journal: unusable: %v", *err)
	}
	if err := j.db.Err(); err != nil {
		return status.Errorf(codes.FailedPrecondition, "journal: unusable: %v", err)
	}
	return nil
}

// Check verifies that the file replays to exactly the state in memory
// (every record's checksum, nothing after the log's end) and that names and
// IDs map one to one. It returns the first problem found.
func (j *File) Check() error {
	if err := j.db.Verify(); err != nil {
		return fmt.Errorf("journal: corrupt: %w", err)
	}
	return j.db.View(func(r kvlog.Reader) error {
		for kind, b := range bucketNames {
			if nn, ni := r.Len(b[0]), r.Len(b[1]); nn != ni {
				return fmt.Errorf("journal: %d %s names but %d IDs", nn, kind, ni)
			}
			err := r.ForEach(b[0], func(name string, v []byte) error {
				rec, err := decodeRecord(kind, []byte(name), v)
				if err != nil {
					return err
				}
				if back := r.Get(b[1], rec.ID); string(back) != rec.Name {
					return fmt.Errorf("journal: %s name %q → ID %q → name %q", kind, rec.Name, rec.ID, back)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func storageErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if s, ok := status.FromError(err); ok {
		return s.Err()
	}
	if errors.Is(err, kvlog.ErrTooLarge) {
		return status.Errorf(codes.ResourceExhausted, "journal %s: %v", op, err)
	}
	return status.Errorf(codes.Internal, "journal %s: %v", op, err)
}

// Reserve implements Journal.
func (j *File) Reserve(ctx context.Context, r Reservation) (Record, error) {
	if err := checkReservation(ctx, r); err != nil {
		return Record{}, err
	}
	// Fast path: a retry of a known name needs no write.
	if rec, ok, err := j.LookupName(ctx, r.Kind, r.Name); err != nil || ok {
		if err == nil && !sameFingerprint(rec.Fingerprint, r.Fingerprint) {
			err = mismatch(rec)
		}
		return rec, err
	}
	if j.volatile[r.Kind] {
		return j.reserveVolatile(r)
	}
	var out Record
	err := j.db.Update(func(tx *kvlog.Tx) error {
		b := bucketNames[r.Kind]
		if v := tx.Get(b[0], r.Name); v != nil {
			rec, err := decodeRecord(r.Kind, []byte(r.Name), v)
			if err != nil {
				return err
			}
			out = rec
			if !sameFingerprint(rec.Fingerprint, r.Fingerprint) {
				return mismatch(rec)
			}
			return nil
		}
		if owner := tx.Get(b[1], r.ID); owner != nil {
			return idTaken(r.Kind, r.ID, string(owner), r.Name)
		}
		out = Record{Kind: r.Kind, Name: r.Name, ID: r.ID, Fingerprint: r.Fingerprint, Reserved: time.Now()}
		tx.Put(b[0], r.Name, encodeRecord(out))
		tx.Put(b[1], r.ID, []byte(r.Name))
		out.Fresh = true
		return nil
	})
	if err != nil {
		return Record{}, storageErr("reserve", err)
	}
	return out, nil
}

// reserveVolatile reserves r in memory (FileOptions.Volatile). The
// pending set's lock is held across the look at the file, so two
// reservations of one name or one ID cannot both succeed; a Commit adds
// to the file before it drops its pending entry, so a name or ID is
// always in one of the two.
func (j *File) reserveVolatile(r Reservation) (Record, error) {
	j.pmu.Lock()
	defer j.pmu.Unlock()
	p := j.pending[r.Kind]
	if rec, ok := p.names[r.Name]; ok {
		if !sameFingerprint(rec.Fingerprint, r.Fingerprint) {
			return rec, mismatch(rec)
		}
		return rec, nil
	}
	var (
		durable, taken bool
		rec            Record
		owner          string
	)
	b := bucketNames[r.Kind]
	err := j.db.View(func(rd kvlog.Reader) error {
		if v := rd.Get(b[0], r.Name); v != nil {
			durable = true
			var err error
			rec, err = decodeRecord(r.Kind, []byte(r.Name), v)
			return err
		}
		if o := rd.Get(b[1], r.ID); o != nil {
			taken, owner = true, string(o)
		}
		return nil
	})
	switch {
	case err != nil:
		return Record{}, storageErr("reserve", err)
	case durable:
		if !sameFingerprint(rec.Fingerprint, r.Fingerprint) {
			return rec, mismatch(rec)
		}
		return rec, nil
	case taken:
		return Record{}, idTaken(r.Kind, r.ID, owner, r.Name)
	}
	if o, ok := p.ids[r.ID]; ok {
		return Record{}, idTaken(r.Kind, r.ID, o, r.Name)
	}
	rec = Record{Kind: r.Kind, Name: r.Name, ID: r.ID, Fingerprint: r.Fingerprint, Reserved: time.Now()}
	p.names[r.Name] = rec
	p.ids[r.ID] = r.Name
	rec.Fresh = true
	return rec, nil
}

// pendingName returns kind's volatile reservation of name, if any.
func (j *File) pendingName(kind Kind, name string) (Record, bool) {
	if !j.volatile[kind] {
		return Record{}, false
	}
	j.pmu.Lock()
	defer j.pmu.Unlock()
	rec, ok := j.pending[kind].names[name]
	return rec, ok
}

// pendingID returns the volatile reservation holding kind's id, if any.
func (j *File) pendingID(kind Kind, id string) (Record, bool) {
	if !j.volatile[kind] {
		return Record{}, false
	}
	j.pmu.Lock()
	defer j.pmu.Unlock()
	p := j.pending[kind]
	name, ok := p.ids[id]
	if !ok {
		return Record{}, false
	}
	return p.names[name], true
}

// dropPending forgets kind's volatile reservation of name if it still
// binds id.
func (j *File) dropPending(kind Kind, name, id string) {
	if !j.volatile[kind] {
		return
	}
	j.pmu.Lock()
	defer j.pmu.Unlock()
	p := j.pending[kind]
	if rec, ok := p.names[name]; ok && rec.ID == id {
		delete(p.names, name)
		delete(p.ids, id)
	}
}

// Commit implements Journal.
func (j *File) Commit(ctx context.Context, kind Kind, name, id string, response []byte) error {
	if err := checkArgs(ctx, kind, name); err != nil {
		return err
	}
	if err := checkArgs(ctx, kind, id); err != nil {
		return err
	}
	// The driver's deferred KV writes join the commit (see KV.DeferPut).
	pend, pending := j.pendingName(kind, name)
	if other, ok := j.pendingID(kind, id); ok && other.Name != name {
		return idTaken(kind, id, other.Name, name)
	}
	cw := callWritesFrom(ctx)
	ops := cw.take(j)
	err := j.db.Update(func(tx *kvlog.Tx) error {
		b := bucketNames[kind]
		var rec Record
		if v := tx.Get(b[0], name); v != nil {
			var err error
			if rec, err = decodeRecord(kind, []byte(name), v); err != nil {
				return err
			}
		} else if pending {
			// The volatile reservation becomes durable with its commit.
			rec = pend
			rec.Fresh = false
			tx.Put(b[1], rec.ID, []byte(name))
		} else {
			return noReservation(kind, name)
		}
		if id != rec.ID {
			if owner := tx.Get(b[1], id); owner != nil && string(owner) != name {
				return idTaken(kind, id, string(owner), name)
			}
			tx.Delete(b[1], rec.ID)
			tx.Put(b[1], id, []byte(name))
			rec.ID = id
		}
		rec.Committed = true
		rec.Response = response
		tx.Put(b[0], name, encodeRecord(rec))
		applyOps(tx, ops)
		return nil
	})
	if err != nil {
		cw.putBack(ops) // the interceptor's final flush retries them alone
		return storageErr("commit", err)
	}
	if pending {
		j.dropPending(kind, name, pend.ID)
	}
	return nil
}

// LookupName implements Journal.
func (j *File) LookupName(ctx context.Context, kind Kind, name string) (rec Record, ok bool, err error) {
	if err := checkArgs(ctx, kind, name); err != nil {
		return Record{}, false, err
	}
	err = j.db.View(func(r kvlog.Reader) error {
		v := r.Get(bucketNames[kind][0], name)
		if v == nil {
			return nil
		}
		ok = true
		rec, err = decodeRecord(kind, []byte(name), v)
		return err
	})
	if err != nil {
		return Record{}, false, storageErr("lookup", err)
	}
	if !ok {
		rec, ok = j.pendingName(kind, name)
	}
	return rec, ok, nil
}

// LookupID implements Journal.
func (j *File) LookupID(ctx context.Context, kind Kind, id string) (rec Record, ok bool, err error) {
	if err := checkArgs(ctx, kind, id); err != nil {
		return Record{}, false, err
	}
	err = j.db.View(func(r kvlog.Reader) error {
		b := bucketNames[kind]
		name := r.Get(b[1], id)
		if name == nil {
			return nil
		}
		v := r.Get(b[0], string(name))
		if v == nil {
			return fmt.Errorf("%s ID %q names %q which has no record", kind, id, name)
		}
		ok = true
		rec, err = decodeRecord(kind, name, v)
		return err
	})
	if err != nil {
		return Record{}, false, storageErr("lookup", err)
	}
	if !ok {
		rec, ok = j.pendingID(kind, id)
	}
	return rec, ok, nil
}

// Release implements Journal.
func (j *File) Release(ctx context.Context, kind Kind, id string) error {
	if err := checkArgs(ctx, kind, id); err != nil {
		return err
	}
	if rec, ok := j.pendingID(kind, id); ok {
		j.dropPending(kind, rec.Name, id) // nothing of it is in the file
	}
	// Nothing to write for an ID the journal does not hold. A look at the
	// index, not LookupID: the record need not be read and decoded.
	var held bool
	if err := j.db.View(func(r kvlog.Reader) error {
		held = r.Has(bucketNames[kind][1], id)
		return nil
	}); err != nil {
		return storageErr("lookup", err)
	}
	if !held {
		return nil
	}
	cw := callWritesFrom(ctx)
	ops := cw.take(j)
	err := j.db.Update(func(tx *kvlog.Tx) error {
		b := bucketNames[kind]
		if name := tx.Get(b[1], id); name != nil {
			tx.Delete(b[0], string(name))
			tx.Delete(b[1], id)
		}
		applyOps(tx, ops)
		return nil
	})
	if err != nil {
		cw.putBack(ops)
	}
	return storageErr("release", err)
}

// Uncommitted implements Lister.
func (j *File) Uncommitted(ctx context.Context, kind Kind, reservedBefore time.Time) ([]Record, error) {
	if err := checkArgs(ctx, kind, "-"); err != nil {
		return nil, err
	}
	var out []Record
	err := j.db.View(func(r kvlog.Reader) error {
		// Unordered, reading the file sequentially: the result is sorted.
		return r.Scan(bucketNames[kind][0], func(name string, v []byte) error {
			if len(v) > 1 && v[1]&1 != 0 {
				return nil // committed: skip without decoding
			}
			rec, err := decodeRecord(kind, []byte(name), v)
			if err != nil {
				return err
			}
			if !rec.Committed && rec.Reserved.Before(reservedBefore) {
				out = append(out, rec)
			}
			return nil
		})
	})
	if err != nil {
		return nil, storageErr("list", err)
	}
	for _, rec := range j.pendingRecords(kind) {
		if rec.Reserved.Before(reservedBefore) {
			out = append(out, rec)
		}
	}
	sortOldestFirst(out)
	return out, nil
}

// pendingRecords returns kind's volatile reservations.
func (j *File) pendingRecords(kind Kind) []Record {
	if !j.volatile[kind] {
		return nil
	}
	j.pmu.Lock()
	defer j.pmu.Unlock()
	out := make([]Record, 0, len(j.pending[kind].names))
	for _, rec := range j.pending[kind].names {
		out = append(out, rec)
	}
	return out
}

// Records implements RecordLister.
func (j *File) Records(ctx context.Context, kind Kind) ([]Record, error) {
	if err := checkArgs(ctx, kind, "-"); err != nil {
		return nil, err
	}
	var out []Record
	err := j.db.View(func(r kvlog.Reader) error {
		return r.ForEach(bucketNames[kind][0], func(name string, v []byte) error {
			rec, err := decodeRecord(kind, []byte(name), v)
			if err != nil {
				return err
			}
			out = append(out, rec)
			return nil
		})
	})
	if err != nil {
		return nil, storageErr("list", err)
	}
	return append(out, j.pendingRecords(kind)...), nil
}

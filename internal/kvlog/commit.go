package kvlog

import (
	"bytes"
	"fmt"
	"slices"
	"time"
)

// Tx is one Update function's view: the committed state plus the writes
// of the functions before it in the same batch, plus its own.
type Tx struct {
	db      *DB
	batch   map[string]map[string]*[]byte // earlier functions' writes; nil value = deleted
	own     map[string]map[string]*[]byte
	ownSize int
	err     error // the first failed read: the function's writes are discarded
}

// Get returns the value of key in bucket as this transaction sees it, or
// nil. The slice must not be modified. If the value cannot be read from
// the file Get returns nil and the Update fails with that error, its
// writes discarded.
func (tx *Tx) Get(bucket, key string) []byte {
	for _, layer := range []map[string]map[string]*[]byte{tx.own, tx.batch} {
		if v, ok := layer[bucket][key]; ok {
			if v == nil {
				return nil
			}
			return *v
		}
	}
	l, ok := tx.db.buckets[bucket].get(key)
	if !ok {
		return nil
	}
	v, err := tx.db.read(l)
	if err != nil && tx.err == nil {
		tx.err = err
	}
	return v
}

// Put sets key in bucket to a copy of value.
func (tx *Tx) Put(bucket, key string, value []byte) {
	v := bytes.Clone(value)
	if v == nil {
		v = []byte{}
	}
	tx.set(bucket, key, &v)
	tx.ownSize += int(opSize(bucket, key, len(v)))
}

// Delete removes key from bucket; a missing key is not an error.
func (tx *Tx) Delete(bucket, key string) {
	tx.set(bucket, key, nil)
	tx.ownSize += int(opSize(bucket, key, 0))
}

func (tx *Tx) set(bucket, key string, v *[]byte) {
	if tx.own == nil {
		tx.own = map[string]map[string]*[]byte{}
	}
	m := tx.own[bucket]
	if m == nil {
		m = map[string]*[]byte{}
		tx.own[bucket] = m
	}
	m[key] = v
}

type write struct {
	fn   func(*Tx) error
	done chan result
}

type result struct {
	err  error
	lead bool // not a result: the receiver is now the leader
}

// Update runs fn and makes its writes durable before returning. Writes of
// functions that run concurrently share one append and one flush: a lone
// caller commits at once, callers that arrive during a commit are all
// committed by the next one. If fn returns an error its writes are
// discarded (not those of other functions in the batch) and Update returns
// that error. fn may be called more than once (it is re-run if its batch
// must be split) and must not call Update or View. Writes over MaxRecord
// fail with ErrTooLarge; while the store is poisoned (see Err) Update
// fails, or first tries to recover the store once Options.RetryAfter has
// passed.
func (db *DB) Update(fn func(*Tx) error) error {
	w := &write{fn: fn, done: make(chan result, 1)}
	db.gmu.Lock()
	if err := db.unusable(); err != nil {
		db.gmu.Unlock()
		return err
	}
	db.queue = append(db.queue, w)
	if db.busy || db.running != nil && db.running.ready {
		db.gmu.Unlock()
		r := <-w.done
		if !r.lead {
			return r.err
		}
		db.gmu.Lock()
	} else {
		db.busy = true
	}
	// Leader, holding gmu: commit what is queued (w included).
	batch := db.queue
	db.queue = nil
	db.gmu.Unlock()

	db.commit(batch)
	db.handOver()
	return (<-w.done).err
}

// handOver ends the caller's leadership: the first queued writer becomes
// the leader, or, with none queued, the store goes idle.
func (db *DB) handOver() {
	db.gmu.Lock()
	defer db.gmu.Unlock()
	if db.running != nil && db.running.ready {
		// A compaction waits to finish (see DB.background): it goes
		// first, and hands over to the queue after.
		db.busy = false
		db.idle.Broadcast()
		return
	}
	if len(db.queue) > 0 {
		db.queue[0].done <- result{lead: true} // buffered: never blocks
		return
	}
	db.busy = false
	db.idle.Broadcast()
}

// wakeQueue makes the first queued writer the leader if there is none.
// Called with gmu held.
func (db *DB) wakeQueue() {
	if !db.busy && len(db.queue) > 0 {
		db.busy = true
		db.queue[0].done <- result{lead: true}
	}
}

// unusable says why a write must fail at once: the store is closed, or
// poisoned and not yet due for a recovery attempt. Called with gmu held.
func (db *DB) unusable() error {
	if db.closed {
		return ErrClosed
	}
	if db.failed != nil && time.Now().Before(db.retryAt) {
		return db.poisoned()
	}
	return nil
}

// poisoned is the error of a write refused because an earlier one failed.
// Called with gmu held.
func (db *DB) poisoned() error {
	return fmt.Errorf("kvlog: an earlier write failed (%w); the store retries by rewriting the file from memory every %s, or reopen it", db.failed, db.opts.RetryAfter)
}

// commit runs batch's functions, appends their writes as one record,
// flushes it and publishes the new state. Called by the leader only.
func (db *DB) commit(batch []*write) {
	// The leader is the only writer of db.buckets: it reads it unlocked.
	merged := map[string]map[string]*[]byte{}
	size := 0
	errs := make([]error, len(batch))
	for i, w := range batch {
		tx := &Tx{db: db, batch: merged}
		if errs[i] = run(w.fn, tx); errs[i] == nil {
			errs[i] = tx.err
		}
		if errs[i] != nil {
			continue
		}
		if tx.ownSize > MaxRecord {
			errs[i] = fmt.Errorf("%w: its writes take %d bytes, at most %d", ErrTooLarge, tx.ownSize, MaxRecord)
			continue
		}
		if size+tx.ownSize > MaxRecord {
			// Too big for one record: the rest goes first into the next.
			db.gmu.Lock()
			db.queue = append(slices.Clone(batch[i:]), db.queue...)
			db.gmu.Unlock()
			batch, errs = batch[:i], errs[:i]
			break
		}
		for b, m := range tx.own {
			dst := merged[b]
			if dst == nil {
				dst = map[string]*[]byte{}
				merged[b] = dst
			}
			for k, v := range m {
				dst[k] = v
			}
		}
		size += tx.ownSize
	}

	var err error
	if len(merged) > 0 {
		err = db.append(merged, size)
	}
	for i, w := range batch {
		if errs[i] == nil {
			errs[i] = err
		}
		w.done <- result{err: errs[i]}
	}
}

// run calls fn, turning a panic into an error: the leader must finish its
// batch, or every later writer would wait forever.
func run(fn func(*Tx) error, tx *Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kvlog: update function panicked: %v", r)
		}
	}()
	return fn(tx)
}

// applied is one op of a record, for the state once the record is durable.
type applied struct {
	b, k string
	v    *[]byte // nil for a delete
	at   int     // a put's value's offset in the payload
	old  []byte  // the value replaced, for a watched bucket
	read bool    // old was read (or there was none)
}

// append writes merged as the next record and, once it is durable, applies
// it to the in-memory state.
func (db *DB) append(merged map[string]map[string]*[]byte, size int) error {
	payload := make([]byte, 0, size)
	var delta int64
	buckets := make([]string, 0, len(merged))
	for b := range merged {
		buckets = append(buckets, b)
	}
	slices.Sort(buckets) // deterministic files, for tests and diffs
	var ops []applied
	// Watched buckets' replaced values are read now, before anything is
	// written: a read that fails then fails the write, not a watcher.
	db.mu.RLock()
	for _, b := range buckets {
		watched := len(db.watches[b]) > 0
		keys := make([]string, 0, len(merged[b]))
		for k := range merged[b] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			op := applied{b: b, k: k, v: merged[b][k], read: watched}
			if old, ok := db.buckets[b].get(k); ok {
				delta -= opSize(b, k, old.len())
				if watched {
					var err error
					if op.old, err = db.read(old); err != nil {
						db.mu.RUnlock()
						return err
					}
				}
			}
			if op.v == nil {
				payload = appendOp(payload, opDelete, b, k, nil)
			} else {
				payload = appendOp(payload, opPut, b, k, *op.v)
				op.at = len(payload) - len(*op.v)
				delta += opSize(b, k, len(*op.v))
			}
			ops = append(ops, op)
		}
	}
	db.mu.RUnlock()
	if err := db.recover(); err != nil {
		return err
	}
	db.gmu.Lock()
	running := db.running != nil
	db.gmu.Unlock()
	if !running && db.end > db.nextCompact && (db.end > db.opts.CompactAt && db.end > 4*(db.live+delta)+int64(headerSize) || db.scattered()) {
		// The copy runs alongside this and later commits (see
		// compaction); if it cannot start, the old log is still the
		// store and takes this write: try again once it has grown by
		// another CompactAt.
		if c, err := db.startCompaction(); err != nil {
			db.nextCompact = db.end + db.opts.CompactAt
		} else {
			db.gmu.Lock()
			db.running = c
			db.gmu.Unlock()
			go db.background(c)
		}
	}
	base := db.end + recHeader // where the payload goes
	if base+int64(len(payload)) > maxOff {
		return fmt.Errorf("kvlog: the file would pass %d bytes", int64(maxOff))
	}
	rec := db.frame(db.seq+1, payload)
	if err := db.grow(db.f, int64(len(rec))); err != nil {
		return err // nothing of the log was touched: later writes may succeed
	}
	if _, err := db.f.WriteAt(rec, db.end); err != nil {
		return db.fail(err)
	}
	if err := datasync(db.f); err != nil {
		return db.fail(err)
	}
	db.seq++
	db.end += int64(len(rec))

	db.mu.Lock()
	defer db.mu.Unlock()
	for _, op := range ops {
		dst := db.buckets[op.b]
		if dst == nil {
			dst = newKeyset()
			db.buckets[op.b] = dst
		}
		watches := db.watches[op.b]
		oldLoc, had := dst.get(op.k)
		if op.v == nil && !had {
			continue
		}
		old := op.old
		if had && len(watches) > 0 && !op.read {
			// A watch that came after the values were read: rare.
			var err error
			if old, err = db.read(oldLoc); err != nil {
				// The record is durable: a watcher missing the old
				// value would drift, so the store must be reopened.
				db.live += delta
				return db.fail(fmt.Errorf("read a replaced value for a watch: %w", err))
			}
		}
		if had && oldLoc.off() >= db.sorted {
			db.misplaced--
			dst.misplaced--
		}
		if op.v == nil {
			dst.del(op.k)
			db.keys--
		} else {
			dst.put(op.k, mkloc(base+int64(op.at), len(*op.v)))
			db.misplaced++
			dst.misplaced++
			if !had {
				db.keys++
			}
		}
		for _, fn := range watches {
			if op.v == nil {
				fn(op.k, old, nil)
			} else {
				fn(op.k, old, *op.v)
			}
		}
	}
	db.live += delta
	return nil
}

// scattered reports that enough values lie out of key order for a
// compaction to be worth its rewrite (see Options.SortAt): over a quarter
// of the store's, so that between two such compactions a bucket grows by
// a third, and the rewrites cost a few times the live data over any
// growth; or over a quarter of one bucket's of SortAt keys or more, whose
// walks are then as scattered though the store's count is not (a
// driver that rewrote every volume record, beside journal buckets that
// stayed in place, had 70% of its volumes out of order and a page of
// ListVolumes read its 500 values one pread each).
func (db *DB) scattered() bool {
	if db.keys < db.opts.SortAt {
		return false
	}
	if db.misplaced > db.keys/4 {
		return true
	}
	for _, ks := range db.buckets {
		if n := ks.len(); n >= db.opts.SortAt && ks.misplaced > n/4 {
			return true
		}
	}
	return false
}

// fail poisons the store after a write or flush error: what reached the
// disk is unknown (and after a failed fsync the kernel may have dropped the
// dirty pages), so the file must be rewritten (recover) or replayed (a
// reopen) before the next write.
func (db *DB) fail(err error) error {
	db.gmu.Lock()
	if db.failed == nil {
		db.failed = err
	}
	db.retryAt = time.Now().Add(db.opts.RetryAfter)
	db.gmu.Unlock()
	return fmt.Errorf("kvlog: %w", err)
}

// recover, on a poisoned store, rewrites the file from memory, which holds
// exactly the acknowledged writes, as a compaction does; on success the
// store takes writes again. Called by the leader only.
func (db *DB) recover() error {
	db.gmu.Lock()
	failed := db.failed
	if failed != nil && time.Now().Before(db.retryAt) {
		err := db.poisoned()
		db.gmu.Unlock()
		return err
	}
	db.gmu.Unlock()
	if failed == nil {
		return nil
	}
	_, err := db.compact()
	db.gmu.Lock()
	defer db.gmu.Unlock()
	if err != nil {
		db.retryAt = time.Now().Add(db.opts.RetryAfter)
		return fmt.Errorf("kvlog: an earlier write failed (%w) and rewriting the file failed too (%v); the store retries every %s, or reopen it", failed, err, db.opts.RetryAfter)
	}
	db.failed = nil
	return nil
}

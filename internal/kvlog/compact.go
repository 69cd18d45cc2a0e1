package kvlog

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
)

// A compaction rewrites the live data into a new file that atomically
// replaces the old one: a stream of records of about compactChunk bytes
// each (the snapshot), then the records committed meanwhile, then the
// header naming how many the snapshot has, one flush, the rename.
//
// It runs in three steps so that commits do not wait for the copy, which
// at 100,000 hostpath volumes took ~400 ms of every commit queued behind
// it:
//
//  1. start (the commit leader): note every key and its value's place,
//     in key order; values already in the file never move (the log is
//     append-only and only step 3 replaces the file), so this is all the
//     copy needs. A few ms at 300,000 keys.
//  2. copy (a goroutine, alongside commits, which go on appending to the
//     old file, and readers): write the snapshot into the new file, each
//     bucket's values in key order, read a batch at a time (see
//     batchReader), and flush it.
//  3. finish (the goroutine again, taking the commit leader's turn):
//     copy the records appended since step 1 after the snapshot, framed
//     anew (their payloads, so their values' places move by one constant
//     shift), write the header, flush, rename, and, under the write lock
//     that readers' Views hold off, swap the file and move every key to
//     its place in the new file. The old file is closed only then: a
//     reader holds the read lock for its whole View, so no read ever
//     meets a closed or replaced file.
//
// Until the rename nothing of db changes: on an error the new file is
// removed and the old one is still the store, retried once the log has
// grown by another Options.CompactAt. A store closed or poisoned during
// step 2 drops the compaction. recover (and tests) run the three steps
// inline through compact.
type compaction struct {
	old     *os.File // the store's file at the start, read by the copy
	snapEnd int64    // the old log's end at the start
	buckets []string
	keys    [][]string // each bucket's keys in key order at the start
	from    [][]loc    // where their values were in the old file
	to      [][]loc    // where the copy put them in the new one
	f       *os.File   // the new file, locked
	salt    [saltSize]byte
	w       snapshotWriter
	err     error // the copy's

	cancelled bool          // guarded by db.gmu: drop it, do not finish
	stop      atomic.Bool   // set with cancelled: the copy stops early
	ready     bool          // guarded by db.gmu: copied, waiting for the leader's turn
	exited    chan struct{} // closed when the goroutine has ended
}

// compact runs a whole compaction inline, first dropping one running in
// the background. Called by the leader (recover) or by a test when no
// writer runs. replaced reports that the rename happened; the DB then
// uses the new file, and an error after it (syncing the directory)
// leaves unknown which file a crash would find.
func (db *DB) compact() (replaced bool, err error) {
	db.dropCompaction()
	c, err := db.startCompaction()
	if err != nil {
		return false, err
	}
	c.copy()
	return db.finishCompaction(c)
}

// startCompaction is step 1: the new file, created and locked, and every
// key's place. Called by the leader.
func (db *DB) startCompaction() (*compaction, error) {
	tmp := db.path + ".compact"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, db.opts.Mode)
	if err != nil {
		return nil, err
	}
	c := &compaction{old: db.f, snapEnd: db.end, f: f, exited: make(chan struct{})}
	// Lock before the rename, so another process never finds the new file
	// unlocked.
	if err := lock(f, 0); err != nil {
		c.discard(db)
		return nil, err
	}
	if _, err := rand.Read(c.salt[:]); err != nil {
		c.discard(db)
		return nil, err
	}
	for b := range db.buckets {
		c.buckets = append(c.buckets, b)
	}
	slices.Sort(c.buckets) // deterministic files, for tests and diffs
	c.keys = make([][]string, len(c.buckets))
	c.from = make([][]loc, len(c.buckets))
	for i, b := range c.buckets {
		ks := db.buckets[b]
		keys, from := make([]string, 0, ks.len()), make([]loc, 0, ks.len())
		// The strings point into the keyset's blocks, which are never
		// modified: the copy may read them while commits go on.
		ks.ascend("", func(k string, l loc) bool {
			keys, from = append(keys, k), append(from, l)
			return true
		})
		c.keys[i], c.from[i] = keys, from
	}
	return c, nil
}

// discard closes and removes the new file.
func (c *compaction) discard(db *DB) {
	c.f.Close()
	os.Remove(db.path + ".compact")
}

// copy is step 2: the snapshot, written and flushed. It reads only the
// old file below snapEnd, which nothing changes, and its own fields.
func (c *compaction) copy() {
	c.w = snapshotWriter{f: c.f, salt: &c.salt, off: headerSize, buf: make([]byte, recHeader, recHeader+compactChunk+sector)}
	c.to = make([][]loc, len(c.buckets))
	br := batchReaders.Get().(*batchReader)
	br.f = c.old
	defer func() {
		br.f, br.buf = nil, nil
		clear(br.vals[:cap(br.vals)])
		batchReaders.Put(br)
	}()
	const batchKeys = 128
	for i, b := range c.buckets {
		keys, from := c.keys[i], c.from[i]
		to := make([]loc, 0, len(keys))
		for j := 0; j < len(keys); {
			if c.stop.Load() { // dropped: Close or a recovery waits for this
				c.err = errors.New("kvlog: compaction dropped")
				return
			}
			// A batch: up to batchKeys keys or batchBytes of values.
			kls, size := br.kls[:0], 0
			for ; j < len(keys) && len(kls) < batchKeys && size < batchBytes; j++ {
				kls = append(kls, keyLoc{keys[j], from[j]})
				size += from[j].len()
			}
			vals, err := br.read(kls)
			if err != nil {
				c.err = err
				return
			}
			for x, kl := range kls {
				l, err := c.w.put(b, kl.k, vals[x])
				if err != nil {
					c.err = err
					return
				}
				to = append(to, l)
			}
			br.kls = kls[:0]
		}
		c.to[i] = to
	}
	if err := c.w.flush(); err != nil {
		c.err = err
		return
	}
	c.err = c.f.Sync()
}

// background runs steps 2 and 3 of c, started by the leader, in a
// goroutine: the copy, then the finish in the commit leader's turn,
// unless the store was closed or poisoned or the compaction dropped
// meanwhile.
func (db *DB) background(c *compaction) {
	defer close(c.exited)
	c.copy()
	db.gmu.Lock()
	// From now on writers queue rather than lead, and the leader hands
	// its turn to this (see handOver): a writer calling Update after
	// Update could otherwise keep the turn from it for ever.
	c.ready = true
	for db.busy && !db.closed && !c.cancelled {
		db.idle.Wait()
	}
	if db.closed || c.cancelled || db.failed != nil {
		// A poisoned store is rewritten by its recovery instead.
		if db.running == c {
			db.running = nil
		}
		db.wakeQueue()
		db.gmu.Unlock()
		c.discard(db)
		return
	}
	db.busy = true
	db.gmu.Unlock()
	if replaced, err := db.finishCompaction(c); err != nil {
		if replaced {
			_ = db.fail(fmt.Errorf("compact: %w", err))
		} else {
			db.nextCompact = db.end + db.opts.CompactAt
		}
	}
	db.handOver()
}

// dropCompaction stops the compaction running in the background, if any,
// and waits for its goroutine to end. Called by the leader, or by Close
// once no leader runs.
func (db *DB) dropCompaction() {
	db.gmu.Lock()
	c := db.running
	if c != nil {
		c.cancelled = true
		c.stop.Store(true)
		db.idle.Broadcast() // it may be waiting for the leader's turn
	}
	db.gmu.Unlock()
	if c == nil {
		return
	}
	<-c.exited
	db.gmu.Lock()
	if db.running == c {
		db.running = nil
	}
	db.gmu.Unlock()
}

// finishCompaction is step 3. Called by the leader; c is dropped
// whatever happens.
func (db *DB) finishCompaction(c *compaction) (replaced bool, err error) {
	defer func() {
		db.gmu.Lock()
		if db.running == c {
			db.running = nil
		}
		db.gmu.Unlock()
		if !replaced {
			c.discard(db)
		}
	}()
	if c.err != nil {
		return false, c.err
	}
	// The records committed since the start, framed anew after the
	// snapshot: the same payloads, so each value moves by shift.
	snapshot, start := c.w.seq, c.w.off
	shift := start - c.snapEnd
	tail := make([]byte, db.end-c.snapEnd)
	if len(tail) > 0 {
		if _, err := db.f.ReadAt(tail, c.snapEnd); err != nil {
			return false, fmt.Errorf("read the records committed during the compaction: %w", err)
		}
	}
	// Framed in place (a frame's size depends only on its payload's),
	// then one write.
	for off := int64(0); off < int64(len(tail)); {
		payload, _, next, ok := db.record(tail, off)
		if !ok {
			return false, fmt.Errorf("the record at offset %d, committed during the compaction, does not verify", c.snapEnd+off)
		}
		c.w.seq++
		db.carried.Add(1)
		copy(tail[off:next], frame(&c.salt, c.w.seq, payload))
		off = next
	}
	if len(tail) > 0 {
		if _, err := c.f.WriteAt(tail, start); err != nil {
			return false, err
		}
	}
	end := start + int64(len(tail))
	// Every key's place in the new file, in the keysets' order: a key
	// whose value is where the start found it moved with the snapshot;
	// one written since, with the tail.
	locs := make([][]loc, 0, len(db.buckets))
	var names []string
	var counts []int // each bucket's values out of key order
	misplaced := 0
	for b, ks := range db.buckets {
		i := slices.Index(c.buckets, b)
		var keys []string
		var from, to []loc
		if i >= 0 {
			keys, from, to = c.keys[i], c.from[i], c.to[i]
		}
		ls := make([]loc, 0, ks.len())
		j, n := 0, 0
		var bad error
		ks.ascend("", func(k string, l loc) bool {
			for j < len(keys) && keys[j] < k {
				j++
			}
			switch {
			case l.off() >= c.snapEnd:
				if l.off()+shift > maxOff {
					bad = fmt.Errorf("kvlog: the file would pass %d bytes", int64(maxOff))
				}
				ls = append(ls, mkloc(l.off()+shift, l.len()))
				n++
			case j < len(keys) && keys[j] == k && from[j] == l:
				ls = append(ls, to[j])
			default:
				bad = fmt.Errorf("kvlog: compaction: %s/%q is at offset %d, before the compaction's start, but not where the compaction found it", b, k, l.off())
			}
			return bad == nil
		})
		if bad != nil {
			return false, bad
		}
		names, locs, counts = append(names, b), append(locs, ls), append(counts, n)
		misplaced += n
	}
	if _, err := c.f.WriteAt(header(&c.salt, snapshot), 0); err != nil {
		return false, err
	}
	if err := writeZeros(c.f, end, db.opts.Grow); err != nil {
		return false, err
	}
	if err := c.f.Sync(); err != nil {
		return false, err
	}
	if err := os.Rename(db.path+".compact", db.path); err != nil {
		return false, err
	}
	db.mu.Lock() // readers read values from db.f
	old := db.f
	db.f = c.f
	for i, b := range names {
		db.buckets[b].setInOrder(locs[i])
		db.buckets[b].misplaced = counts[i]
	}
	db.mu.Unlock()
	old.Close()
	db.salt = c.salt
	db.seq, db.snapshot = c.w.seq, snapshot
	db.end, db.size = end, end+db.opts.Grow
	db.sorted, db.misplaced = start, misplaced
	db.nextCompact = 0
	db.compactions.Add(1)
	return true, syncDir(filepath.Dir(db.path))
}

// snapshotWriter writes a compaction's records one after the other.
type snapshotWriter struct {
	f    *os.File
	salt *[saltSize]byte
	seq  uint64 // records written
	off  int64  // where the next one goes
	buf  []byte // the record being built: room for its header, then ops
}

var zeroSector [sector]byte

// put adds one key's op, first writing the record being built if the op
// would take it past compactChunk, and returns where v will be in the
// file. An op alone is never larger than MaxRecord: it was one Update's
// write.
func (w *snapshotWriter) put(b, k string, v []byte) (loc, error) {
	if len(w.buf) > recHeader && int64(len(w.buf)-recHeader)+opSize(b, k, len(v)) > compactChunk {
		if err := w.flush(); err != nil {
			return 0, err
		}
	}
	w.buf = appendOp(w.buf, opPut, b, k, v)
	if at := w.off + int64(len(w.buf)-len(v)); at+int64(len(v)) <= maxOff {
		return mkloc(at, len(v)), nil
	}
	return 0, fmt.Errorf("kvlog: the file would pass %d bytes", int64(maxOff))
}

// flush writes the record being built, if it has any op.
func (w *snapshotWriter) flush() error {
	n := len(w.buf) - recHeader
	if n == 0 {
		return nil
	}
	w.seq++
	binary.LittleEndian.PutUint32(w.buf[0:4], uint32(n))
	binary.LittleEndian.PutUint64(w.buf[4:12], w.seq)
	binary.LittleEndian.PutUint32(w.buf[12:16], checksum(w.salt, w.buf[0:12], w.buf[recHeader:]))
	w.buf = append(w.buf, zeroSector[:align(int64(len(w.buf)))-int64(len(w.buf))]...)
	if _, err := w.f.WriteAt(w.buf, w.off); err != nil {
		return err
	}
	w.off += int64(len(w.buf))
	w.buf = w.buf[:recHeader]
	return nil
}

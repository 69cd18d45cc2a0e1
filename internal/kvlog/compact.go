package kvlog

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// compaction is a rewrite of the live data into a new file (see the
// package comment). It runs in three parts: the leader notes every key and
// where its value is (snapshot); the values are copied, in key order, into
// the new file, which is flushed (write: in the background, while commits
// go on appending to the old file, whose values in the snapshot never
// change); then, as leader again, the records appended meanwhile are
// copied after them, the new file is flushed and renamed over the old one,
// and the keys' places are updated (finish). A commit waits only for the
// last part, which copies a few records, not the whole store.
type compaction struct {
	f       *os.File // the old file, the store when the snapshot was taken
	end     int64    // the old log's end at the snapshot
	buckets []string
	keys    [][]keyLoc // each bucket's keys in order, with their places in f
	done    chan struct{}

	// Set by write.
	nf   *os.File // the new file, locked
	w    snapshotWriter
	salt [saltSize]byte
	// moved[i][j] is where keys[i][j]'s value is in nf.
	moved [][]loc
}

// takeSnapshot notes the live keys and their places. Called by the leader.
func (db *DB) takeSnapshot() *compaction {
	c := &compaction{f: db.f, end: db.end, done: make(chan struct{})}
	for b, m := range db.state {
		if len(m) > 0 {
			c.buckets = append(c.buckets, b)
		}
	}
	slices.Sort(c.buckets) // deterministic files, for tests and diffs
	c.keys = make([][]keyLoc, len(c.buckets))
	for i, b := range c.buckets {
		m, x := db.state[b], db.index[b]
		kls := make([]keyLoc, 0, len(m))
		x.ascend("", func(k string) bool {
			kls = append(kls, keyLoc{k, m[k]})
			return true
		})
		c.keys[i] = kls
	}
	return c
}

// compact rewrites the live state into a new file that atomically replaces
// the old one, all of it as the leader (a recovery, tests). replaced
// reports that the rename happened (see finish).
func (db *DB) compact() (replaced bool, err error) {
	c := db.takeSnapshot()
	close(c.done)
	if err := c.write(db.path, db.opts); err != nil {
		return false, err
	}
	return db.finish(c)
}

// startCompaction starts a compaction whose copy runs in the background.
// Called by the leader; none must be running.
func (db *DB) startCompaction() {
	c := db.takeSnapshot()
	db.gmu.Lock()
	db.compacting = c
	db.gmu.Unlock()
	go db.runCompaction(c)
}

// runCompaction copies c's values into the new file, then takes the
// leader's turn to finish it. A store closed meanwhile drops it, as does
// one poisoned (its recovery rewrites the file anyway); a failed one is
// retried once the log has grown by another CompactAt.
func (db *DB) runCompaction(c *compaction) {
	defer close(c.done)
	err := c.write(db.path, db.opts)
	if afterCompactionWrite != nil {
		afterCompactionWrite()
	}
	db.gmu.Lock()
	for db.busy && !db.closed {
		db.idle.Wait()
	}
	if db.closed {
		db.compacting = nil
		db.gmu.Unlock()
		c.discard(db.path)
		return
	}
	db.busy = true
	failed := db.failed
	db.gmu.Unlock()
	switch {
	case err != nil: // write removed its file
		db.nextCompact = db.end + db.opts.CompactAt
	case failed != nil:
		c.discard(db.path)
	default:
		if replaced, err := db.finish(c); err != nil {
			if replaced {
				_ = db.fail(fmt.Errorf("compact: %w", err))
			} else {
				db.nextCompact = db.end + db.opts.CompactAt
			}
		}
	}
	db.gmu.Lock()
	db.compacting = nil
	db.gmu.Unlock()
	db.handOver()
}

// afterCompactionWrite, when set (by tests), runs between a background
// compaction's copy and its finish.
var afterCompactionWrite func()

// waitCompaction waits for the background compaction, if one runs, to
// end. For tests.
func (db *DB) waitCompaction() {
	db.gmu.Lock()
	c := db.compacting
	db.gmu.Unlock()
	if c != nil {
		<-c.done
	}
}

// discard removes the new file of a compaction that will not finish.
func (c *compaction) discard(path string) {
	if c.nf != nil {
		c.nf.Close()
		os.Remove(path + ".compact")
		c.nf = nil
	}
}

// write creates the new file and copies the snapshot's values into it, in
// key order, then flushes it. It reads only c.f at places that never
// change, so it needs no lock. On an error the new file is removed.
func (c *compaction) write(path string, o Options) (err error) {
	tmp := path + ".compact"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, o.Mode)
	if err != nil {
		return err
	}
	c.nf = f
	defer func() {
		if err != nil {
			c.discard(path)
		}
	}()
	// Lock before the rename, so another process never finds the new file
	// unlocked.
	if err := lock(f, 0); err != nil {
		return err
	}
	if _, err := rand.Read(c.salt[:]); err != nil {
		return err
	}
	c.w = snapshotWriter{f: f, salt: &c.salt, off: headerSize, buf: make([]byte, recHeader, recHeader+compactChunk+sector)}
	// Each bucket's values are copied in key order, so that a walk of a
	// run of keys (a page of a listing) reads one stretch of the new file;
	// they are read a batch at a time, in offset order (see walkFile),
	// which costs a read per value only the first time: later, only values
	// written since the last compaction are out of place. Where each
	// lands is noted, and applied once the new file is the store.
	c.moved = make([][]loc, len(c.buckets))
	for i, b := range c.buckets {
		kls := c.keys[i]
		moved := make([]loc, 0, len(kls))
		err := walkFile(c.f, func(add func(keyLoc) bool) {
			for _, kl := range kls {
				if !add(kl) {
					return
				}
			}
		}, func(k string, v []byte) error {
			l, err := c.w.put(b, k, v)
			moved = append(moved, l)
			return err
		})
		if err != nil {
			return err
		}
		c.moved[i] = moved
	}
	if err := c.w.flush(); err != nil {
		return err
	}
	if _, err := f.WriteAt(header(&c.salt, c.w.seq), 0); err != nil {
		return err
	}
	if err := writeZeros(f, c.w.off, o.Grow); err != nil {
		return err
	}
	return f.Sync()
}

// finish, as the leader, copies the records appended to the old file
// since the snapshot into the new one (same payloads, so same places
// relative to each other), flushes it, renames it over the old one and
// moves every key to its place in it. Until the rename nothing of db
// changes: on an error the new file is removed and the old one is still
// the store. replaced reports that the rename happened; the DB then uses
// the new file, and an error after it (syncing the directory) leaves
// unknown which file a crash would find.
func (db *DB) finish(c *compaction) (replaced bool, err error) {
	defer func() {
		if !replaced {
			c.discard(db.path)
		}
	}()
	if db.f != c.f {
		return false, errors.New("kvlog: the file was replaced during the compaction")
	}
	f, w := c.nf, &c.w
	sorted := w.off // the end of the snapshot's records in the new file
	shift := sorted - c.end
	// The records appended since the snapshot, framed anew.
	win := &window{f: c.f, size: db.end}
	seq := w.seq
	for off := c.end; off < db.end; {
		payload, _, next, ok, err := db.recordAt(win, off)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, fmt.Errorf("kvlog: record at offset %d does not verify in the log being compacted", off)
		}
		seq++
		rec := make([]byte, next-off)
		binary.LittleEndian.PutUint32(rec[0:4], uint32(len(payload)))
		binary.LittleEndian.PutUint64(rec[4:12], seq)
		binary.LittleEndian.PutUint32(rec[12:16], checksum(&c.salt, rec[0:12], payload))
		copy(rec[recHeader:], payload)
		if _, err := f.WriteAt(rec, off+shift); err != nil {
			return false, err
		}
		off = next
	}
	end, size := db.end+shift, sorted+db.opts.Grow
	if seq > w.seq {
		// Zeros after the copied records, as after any log's end.
		if err := writeZeros(f, end, db.opts.Grow); err != nil {
			return false, err
		}
		size = end + db.opts.Grow
	}
	// Every live key's new place: a value unchanged since the snapshot
	// is where the copy put it, one written since is in a copied record.
	// Decided on the places as they are now, applied after the rename.
	type change struct {
		m map[string]loc
		k string
		l loc
	}
	var changes []change
	for i, b := range c.buckets {
		m := db.state[b]
		for j, kl := range c.keys[i] {
			if l, ok := m[kl.k]; ok && l == kl.l {
				changes = append(changes, change{m, kl.k, c.moved[i][j]})
			}
		}
	}
	misplaced := 0
	for _, m := range db.state {
		for k, l := range m {
			if l.off() >= c.end {
				changes = append(changes, change{m, k, mkloc(l.off()+shift, l.len())})
				misplaced++
			}
		}
	}
	if len(changes) != db.keys {
		return false, fmt.Errorf("kvlog: compaction placed %d of %d keys", len(changes), db.keys)
	}
	if seq > w.seq {
		if err := f.Sync(); err != nil {
			return false, err
		}
	}
	if err := os.Rename(db.path+".compact", db.path); err != nil {
		return false, err
	}
	db.mu.Lock() // readers read values from db.f
	old := db.f
	db.f = f
	for _, ch := range changes {
		ch.m[ch.k] = ch.l
	}
	db.mu.Unlock()
	old.Close()
	db.salt = c.salt
	db.seq, db.snapshot = seq, w.seq
	db.end, db.size = end, size
	db.sorted, db.misplaced = sorted, misplaced
	db.nextCompact = 0
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

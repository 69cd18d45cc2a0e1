package kvlog

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// compact rewrites the live state into a new file that atomically replaces
// the old one: a stream of records of about compactChunk bytes each, then
// the header naming how many, one flush, the rename. Called by the leader
// only (it reads db.state unlocked).
//
// Until the rename nothing of db changes: on an error the new file is
// removed and the old one is still the store. replaced reports that the
// rename happened; the DB then uses the new file, and an error after it
// (syncing the directory) leaves unknown which file a crash would find.
func (db *DB) compact() (replaced bool, err error) {
	tmp := db.path + ".compact"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, db.opts.Mode)
	if err != nil {
		return false, err
	}
	defer func() {
		if !replaced {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// Lock before the rename, so another process never finds the new file
	// unlocked.
	if err := lock(f, 0); err != nil {
		return false, err
	}
	var salt [saltSize]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return false, err
	}
	w := snapshotWriter{f: f, salt: &salt, off: headerSize, buf: make([]byte, recHeader, recHeader+compactChunk+sector)}
	buckets := make([]string, 0, len(db.state))
	for b := range db.state {
		buckets = append(buckets, b)
	}
	slices.Sort(buckets) // deterministic files, for tests and diffs
	// Each bucket's values are copied in key order, so that a walk of a
	// run of keys (a page of a listing) reads one stretch of the new file;
	// they are read a batch at a time, in offset order (see walk), which
	// costs a read per value only the first time: later, only values
	// written since the last compaction are out of place. Where each
	// lands is noted, and applied once the new file is the store.
	moved := make([][]keyLoc, len(buckets))
	for i, b := range buckets {
		m, x := db.state[b], db.index[b]
		moved[i] = make([]keyLoc, 0, len(m))
		err := db.walk(m, func(fn func(string) bool) { x.ascend("", fn) }, func(k string, v []byte) error {
			l, err := w.put(b, k, v)
			moved[i] = append(moved[i], keyLoc{k, l})
			return err
		})
		if err != nil {
			return false, err
		}
	}
	if err := w.flush(); err != nil {
		return false, err
	}
	if _, err := f.WriteAt(header(&salt, w.seq), 0); err != nil {
		return false, err
	}
	if err := writeZeros(f, w.off, db.opts.Grow); err != nil {
		return false, err
	}
	if err := f.Sync(); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, db.path); err != nil {
		return false, err
	}
	db.mu.Lock() // readers read values from db.f
	old := db.f
	db.f = f
	for i, b := range buckets {
		m := db.state[b]
		for _, kl := range moved[i] {
			m[kl.k] = kl.l
		}
	}
	db.mu.Unlock()
	old.Close()
	db.salt = salt
	db.seq, db.snapshot = w.seq, w.seq
	db.end, db.size = w.off, w.off+db.opts.Grow
	db.sorted, db.misplaced = w.off, 0
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

package kvlog

import (
	"fmt"
	"os"
	"path/filepath"
)

// compact rewrites the live state into a new file that atomically replaces
// the old one. Called by the leader only.
func (db *DB) compact() error {
	tmp := db.path + ".compact"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, db.opts.Mode)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// Lock before the rename, so another process never finds the new file
	// unlocked.
	if err := lock(f, 0); err != nil {
		return err
	}
	oldSalt, oldSeq, oldEnd, oldSize := db.salt, db.seq, db.end, db.size
	restore := func(err error) error {
		db.salt, db.seq, db.end, db.size = oldSalt, oldSeq, oldEnd, oldSize
		return err
	}
	if err := db.initFile(f); err != nil {
		return restore(err)
	}
	var payload []byte
	if err := (Reader{db}).forEachBucket(func(b, k string, v []byte) {
		payload = appendOp(payload, opPut, b, k, v)
	}); err != nil {
		return restore(err)
	}
	if len(payload) > 0 {
		if len(payload) > MaxRecord {
			return restore(fmt.Errorf("live data of %d bytes exceeds %d", len(payload), MaxRecord))
		}
		rec := db.frame(1, payload)
		if err := db.grow(f, int64(len(rec))); err != nil {
			return restore(err)
		}
		if _, err := f.WriteAt(rec, db.end); err != nil {
			return restore(err)
		}
		if err := f.Sync(); err != nil {
			return restore(err)
		}
		db.seq, db.end = 1, db.end+int64(len(rec))
	}
	if err := os.Rename(tmp, db.path); err != nil {
		return restore(err)
	}
	ok = true
	db.f.Close()
	db.f = f
	return syncDir(filepath.Dir(db.path))
}

func (r Reader) forEachBucket(fn func(b, k string, v []byte)) error {
	for _, b := range r.Buckets() {
		if err := r.ForEach(b, func(k string, v []byte) error { fn(b, k, v); return nil }); err != nil {
			return err
		}
	}
	return nil
}

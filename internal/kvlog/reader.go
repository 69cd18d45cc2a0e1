package kvlog

import "slices"

// Reader reads the committed state. Keys are in memory; values are read
// from the file (the page cache, as a rule) when asked for. A failed read
// makes the View fail (see View).
type Reader struct {
	db  *DB
	err *error // the first failed read
}

func (r Reader) fail(err error) {
	if *r.err == nil {
		*r.err = err
	}
}

// Get returns a copy of the value of key in bucket, or nil if there is
// none or it could not be read (View then fails).
func (r Reader) Get(bucket, key string) []byte {
	l, ok := r.db.buckets[bucket].get(key)
	if !ok {
		return nil
	}
	v, err := r.db.read(l)
	if err != nil {
		r.fail(err)
		return nil
	}
	return v
}

// Has reports whether bucket has key, without reading its value.
func (r Reader) Has(bucket, key string) bool {
	_, ok := r.db.buckets[bucket].get(key)
	return ok
}

// Len returns the number of keys in bucket.
func (r Reader) Len(bucket string) int { return r.db.buckets[bucket].len() }

// ForEach calls fn for every key of bucket in key order. An error from fn
// stops the walk and is returned. fn must not call Update. value is valid
// only during the call.
func (r Reader) ForEach(bucket string, fn func(key string, value []byte) error) error {
	return r.ForEachFrom(bucket, "", fn)
}

// ForEachFrom calls fn for every key of bucket not before from, in key
// order, as ForEach does. It costs the keys it visits, whatever from is;
// their values are read a batch of keys at a time, in few reads (see
// batchReader), so a walk may read some values beyond where fn stops it.
func (r Reader) ForEachFrom(bucket, from string, fn func(key string, value []byte) error) error {
	return r.db.walk(r.db.buckets[bucket], from, fn)
}

// Scan calls fn for every key of bucket in no particular order (that of
// the values in the file): a walk of a whole bucket that reads the file
// sequentially rather than a value at a time. value is valid only during
// the call. An error from fn stops the walk and is returned.
func (r Reader) Scan(bucket string, fn func(key string, value []byte) error) error {
	return r.db.scan(r.db.buckets[bucket], fn)
}

// Buckets returns the names of the non-empty buckets, sorted.
func (r Reader) Buckets() []string {
	var out []string
	for b, ks := range r.db.buckets {
		if ks.len() > 0 {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// View calls fn with the committed state; writes wait until it returns.
// If a value could not be read from the file, View returns that error
// whatever fn returned.
func (db *DB) View(fn func(Reader) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	var rerr error
	err := fn(Reader{db, &rerr})
	if rerr != nil {
		return rerr
	}
	return err
}

// Watch calls fn(key, nil, value) for every key of bucket now, then
// fn(key, old, new) for every change to bucket once it is durable, in
// commit order (new is nil for a delete, old nil for a new key). The
// calls are made with the store locked, so what fn has seen always
// matches what readers see: fn must be quick, must not keep or modify the
// slices, and must not call the store. There is no unwatching. If the
// values cannot be read, Watch returns that error and does not watch.
//
// The seeding holds no commit back from readers: Watch takes the commit
// leader's turn (no commit runs until it returns, as for Verify) and
// reads under the read lock, so Views — another Watch's seeding, a
// driver's start walking the same store — run alongside it.
func (db *DB) Watch(bucket string, fn func(key string, old, new []byte)) error {
	db.gmu.Lock()
	for db.busy {
		db.idle.Wait()
	}
	db.busy = true
	db.gmu.Unlock()
	defer db.handOver() // writers queued meanwhile wait for a leader
	db.mu.RLock()
	err := db.scan(db.buckets[bucket], func(k string, v []byte) error { fn(k, nil, v); return nil })
	db.mu.RUnlock()
	if err != nil {
		return err
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.watches == nil {
		db.watches = map[string][]func(string, []byte, []byte){}
	}
	db.watches[bucket] = append(db.watches[bucket], fn)
	return nil
}

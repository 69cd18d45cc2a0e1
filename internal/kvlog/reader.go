package kvlog

import "slices"

// Reader reads the committed state.
type Reader struct{ db *DB }

// Get returns the value of key in bucket, or nil. The slice must not be
// modified.
func (r Reader) Get(bucket, key string) []byte { return r.db.state[bucket][key] }

// Len returns the number of keys in bucket.
func (r Reader) Len(bucket string) int { return len(r.db.state[bucket]) }

// ForEach calls fn for every key of bucket in key order. An error from fn
// stops the walk and is returned. fn must not call Update.
func (r Reader) ForEach(bucket string, fn func(key string, value []byte) error) error {
	return r.ForEachFrom(bucket, "", fn)
}

// ForEachFrom calls fn for every key of bucket not before from, in key
// order, as ForEach does. It costs the keys it visits, whatever from is.
func (r Reader) ForEachFrom(bucket, from string, fn func(key string, value []byte) error) error {
	x := r.db.index[bucket]
	if x == nil {
		return nil
	}
	m := r.db.state[bucket]
	var err error
	x.ascend(from, func(k string) bool {
		err = fn(k, m[k])
		return err == nil
	})
	return err
}

// Buckets returns the names of the non-empty buckets, sorted.
func (r Reader) Buckets() []string {
	var out []string
	for b, m := range r.db.state {
		if len(m) > 0 {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// View calls fn with the committed state; writes wait until it returns.
func (db *DB) View(fn func(Reader) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return fn(Reader{db})
}

// Watch calls fn(key, nil, value) for every key of bucket now, then
// fn(key, old, new) for every change to bucket once it is durable, in
// commit order (new is nil for a delete, old nil for a new key). The
// calls are made with the store locked, so what fn has seen always
// matches what readers see: fn must be quick, must not keep or modify the
// slices, and must not call the store. There is no unwatching.
func (db *DB) Watch(bucket string, fn func(key string, old, new []byte)) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.watches == nil {
		db.watches = map[string][]func(string, []byte, []byte){}
	}
	db.watches[bucket] = append(db.watches[bucket], fn)
	for k, v := range db.state[bucket] {
		fn(k, nil, v)
	}
}

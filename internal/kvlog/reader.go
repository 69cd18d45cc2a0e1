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
	m := r.db.state[bucket]
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := fn(k, m[k]); err != nil {
			return err
		}
	}
	return nil
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

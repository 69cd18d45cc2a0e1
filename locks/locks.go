package locks

import (
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"time"
)

// Mode says whom a lock excludes.
type Mode uint8

const (
	// Exclusive excludes every other holder of the same key.
	Exclusive Mode = iota
	// Shared admits other Shared holders and excludes Exclusive ones: many
	// snapshots may be taken from one volume at once, but none while the
	// volume is being deleted or expanded.
	Shared
)

// String returns "exclusive" or "shared".
func (m Mode) String() string {
	if m == Shared {
		return "shared"
	}
	return "exclusive"
}

// Key names one lockable thing. Space keeps namespaces apart (a volume ID
// and a volume name never collide) and reads well in messages, for example
// `volume "vol-1"`. Both parts are opaque: they are compared, hashed and
// printed quoted, never interpreted.
type Key struct {
	// Space is the key's namespace, e.g. "volume" or "name".
	Space string
	// ID is the thing's identifier within Space.
	ID string
}

// The key spaces the default key functions use. Drivers may invent their own.
const (
	SpaceVolume            = "volume"
	SpaceVolumeName        = "volume name"
	SpaceSnapshot          = "snapshot"
	SpaceSnapshotName      = "snapshot name"
	SpaceGroupSnapshot     = "group snapshot"
	SpaceGroupSnapshotName = "group snapshot name"
	SpacePath              = "target path"
	// SpaceSourceVolume is the operation lock on a volume used as the
	// source of a snapshot or clone (Shared), taken Exclusive by
	// DeleteVolume and ControllerExpandVolume.
	SpaceSourceVolume = "source volume"
	// SpaceSourceSnapshot is the operation lock on a snapshot being restored
	// into a new volume (Shared), taken Exclusive by DeleteSnapshot.
	SpaceSourceSnapshot = "source snapshot"
)

// Holder describes who holds a key that could not be acquired.
type Holder struct {
	// Method is the gRPC full method name of the (first) holder.
	Method string
	// Held is how long the key has been held.
	Held time.Duration
	// Shared is the number of Shared holders, 0 if held Exclusive.
	Shared int
}

// Stats is a snapshot of a lock table for metrics.
type Stats struct {
	// Held is the number of keys held right now.
	Held int
	// Oldest is the age of the oldest hold, 0 if none is held.
	Oldest time.Duration
}

const (
	numShards = 64
	// A shard whose map once grew past this many entries gets a fresh map
	// when it empties, so a burst does not pin memory for ever.
	shrinkAbove = 1024
)

type entry struct {
	key    Key
	method string
	since  int64 // nanoseconds since Table.base, monotonic
	shared int32 // number of Shared holders; 0 means Exclusive
}

// A shard maps the 64-bit hash of a key to its entry, so each operation
// hashes the key once (maphash) instead of once per map access. Keys whose
// hash slot is taken by another key (a 2⁻⁶⁴ event per pair, but possible)
// live in the overflow map.
type shard struct {
	mu       sync.Mutex
	m        map[uint64]entry
	overflow map[Key]entry
	peak     int
	_        [32]byte // keep shards on separate cache lines
}

// find returns the key's entry and whether it is in the overflow map.
func (s *shard) find(h uint64, k Key) (e entry, held, inOverflow bool) {
	e, held = s.m[h]
	if held && e.key == k {
		return e, true, false
	}
	if len(s.overflow) > 0 {
		e, held = s.overflow[k]
		return e, held, held
	}
	return entry{}, false, false
}

// store inserts or updates e where its key lives now: an update of a key
// in overflow stays there even if its primary slot has since been freed.
func (s *shard) store(h uint64, e entry) {
	prev, taken := s.m[h]
	if taken && prev.key == e.key {
		s.m[h] = e
		return
	}
	if _, inOverflow := s.overflow[e.key]; !inOverflow && !taken {
		s.m[h] = e
		return
	}
	if s.overflow == nil {
		s.overflow = make(map[Key]entry)
	}
	s.overflow[e.key] = e
}

func (s *shard) remove(h uint64, k Key, inOverflow bool) {
	if inOverflow {
		delete(s.overflow, k)
	} else {
		delete(s.m, h)
	}
}

func (s *shard) len() int { return len(s.m) + len(s.overflow) }

// Table is a set of keyed try-locks. Acquiring a held key fails at once,
// never waits, and reports the holder. Entries are deleted on release, so the
// table holds exactly the keys held now. The zero value is not usable; call
// NewTable. A Table is safe for concurrent use.
type Table struct {
	seed   maphash.Seed
	base   time.Time // monotonic origin of entry.since
	shards [numShards]shard
}

// NewTable returns an empty lock table.
func NewTable() *Table {
	t := &Table{seed: maphash.MakeSeed(), base: time.Now()}
	for i := range t.shards {
		t.shards[i].m = make(map[uint64]entry)
	}
	return t
}

func (t *Table) hashOf(k Key) uint64 {
	return maphash.String(t.seed, k.ID) ^ (maphash.String(t.seed, k.Space) * 0x9e3779b97f4a7c15)
}

func (t *Table) shardOf(h uint64) *shard { return &t.shards[h%numShards] }

// Owner identifies the caller of TryLock.
type Owner struct {
	// Method is the gRPC full method name, reported to conflicting callers.
	Method string
	// Since is when the owner's call started. The table reads no clock:
	// a call taking several locks reads it once (a clock read costs about
	// as much as the lock itself). Zero means now.
	Since time.Time
}

// TryLock acquires key in mode for o. It returns true on success. On
// failure it returns false and who holds the key, with the hold's age
// measured up to o.Since; it never blocks.
func (t *Table) TryLock(key Key, mode Mode, o Owner) (Holder, bool) {
	return t.tryLock(t.hashOf(key), key, mode, o)
}

// tryLock is TryLock for a key whose hash (hashOf) is h.
func (t *Table) tryLock(h uint64, key Key, mode Mode, o Owner) (Holder, bool) {
	if o.Since.IsZero() {
		o.Since = time.Now()
	}
	since := int64(o.Since.Sub(t.base))
	s := t.shardOf(h)
	s.mu.Lock()
	e, held, _ := s.find(h, key)
	if !held {
		e = entry{key: key, method: o.Method, since: since}
		if mode == Shared {
			e.shared = 1
		}
		s.store(h, e)
		if n := s.len(); n > s.peak {
			s.peak = n
		}
		s.mu.Unlock()
		return Holder{}, true
	}
	if mode == Shared && e.shared > 0 {
		e.shared++
		s.store(h, e)
		s.mu.Unlock()
		return Holder{}, true
	}
	s.mu.Unlock()
	return Holder{Method: e.method, Held: max(time.Duration(since-e.since), 0), Shared: int(e.shared)}, false
}

// Unlock releases a key acquired with TryLock in the same mode. Releasing a
// key that is not held in that mode does nothing.
func (t *Table) Unlock(key Key, mode Mode) { t.unlock(t.hashOf(key), key, mode) }

// unlock is Unlock for a key whose hash (hashOf) is h.
func (t *Table) unlock(h uint64, key Key, mode Mode) {
	s := t.shardOf(h)
	s.mu.Lock()
	e, held, inOverflow := s.find(h, key)
	switch {
	case !held || (mode == Shared) != (e.shared > 0):
	case e.shared > 1:
		e.shared--
		s.store(h, e)
	default:
		s.remove(h, key, inOverflow)
		if s.len() == 0 && s.peak > shrinkAbove {
			s.m = make(map[uint64]entry)
			s.overflow = nil
			s.peak = 0
		}
	}
	s.mu.Unlock()
}

// Stats reports how many keys are held and the age of the oldest hold. It
// costs one pass over the held keys.
func (t *Table) Stats() Stats {
	var st Stats
	oldest := int64(math.MaxInt64)
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		st.Held += s.len()
		for _, e := range s.m {
			oldest = min(oldest, e.since)
		}
		for _, e := range s.overflow {
			oldest = min(oldest, e.since)
		}
		s.mu.Unlock()
	}
	if st.Held > 0 {
		st.Oldest = max(time.Since(t.base)-time.Duration(oldest), 0)
	}
	return st
}

// busyMessage is the text of the Aborted answer for a key held by h.
func busyMessage(k Key, h Holder) string {
	who := h.Method
	if h.Shared > 1 {
		who = fmt.Sprintf("%s (and %d more shared holders)", h.Method, h.Shared-1)
	}
	return fmt.Sprintf("%s %q is busy: %s has held it for %s; retry later",
		k.Space, k.ID, who, h.Held.Round(time.Millisecond))
}

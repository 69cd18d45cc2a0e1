package idempotency

import (
	"fmt"
	"hash/maphash"
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
	Space string
	ID    string
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

// LockStats is a snapshot of a lock table for metrics.
type LockStats struct {
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
	method string
	since  time.Time
	shared int32 // number of Shared holders; 0 means Exclusive
}

type shard struct {
	mu   sync.Mutex
	m    map[Key]entry
	peak int
	_    [40]byte // keep shards on separate cache lines
}

// LockTable is a set of keyed try-locks. Acquiring a held key fails at once,
// never waits, and reports the holder. Entries are deleted on release, so the
// table holds exactly the keys held now. The zero value is not usable; call
// NewLockTable. A LockTable is safe for concurrent use.
type LockTable struct {
	seed   maphash.Seed
	shards [numShards]shard
}

// NewLockTable returns an empty lock table.
func NewLockTable() *LockTable {
	t := &LockTable{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i].m = make(map[Key]entry)
	}
	return t
}

func (t *LockTable) shard(k Key) *shard {
	return &t.shards[maphash.String(t.seed, k.ID)%numShards]
}

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
func (t *LockTable) TryLock(key Key, mode Mode, o Owner) (Holder, bool) {
	if o.Since.IsZero() {
		o.Since = time.Now()
	}
	s := t.shard(key)
	s.mu.Lock()
	e, held := s.m[key]
	if !held {
		e = entry{method: o.Method, since: o.Since}
		if mode == Shared {
			e.shared = 1
		}
		s.m[key] = e
		if len(s.m) > s.peak {
			s.peak = len(s.m)
		}
		s.mu.Unlock()
		return Holder{}, true
	}
	if mode == Shared && e.shared > 0 {
		e.shared++
		s.m[key] = e
		s.mu.Unlock()
		return Holder{}, true
	}
	s.mu.Unlock()
	return Holder{Method: e.method, Held: max(o.Since.Sub(e.since), 0), Shared: int(e.shared)}, false
}

// Unlock releases a key acquired with TryLock in the same mode. Releasing a
// key that is not held in that mode does nothing.
func (t *LockTable) Unlock(key Key, mode Mode) {
	s := t.shard(key)
	s.mu.Lock()
	e, held := s.m[key]
	switch {
	case !held || (mode == Shared) != (e.shared > 0):
	case e.shared > 1:
		e.shared--
		s.m[key] = e
	default:
		delete(s.m, key)
		if len(s.m) == 0 && s.peak > shrinkAbove {
			s.m = make(map[Key]entry)
			s.peak = 0
		}
	}
	s.mu.Unlock()
}

// Stats reports how many keys are held and the age of the oldest hold. It
// costs one pass over the held keys.
func (t *LockTable) Stats() LockStats {
	var st LockStats
	var oldest time.Time
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		st.Held += len(s.m)
		for _, e := range s.m {
			if oldest.IsZero() || e.since.Before(oldest) {
				oldest = e.since
			}
		}
		s.mu.Unlock()
	}
	if !oldest.IsZero() {
		st.Oldest = max(time.Since(oldest), 0)
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

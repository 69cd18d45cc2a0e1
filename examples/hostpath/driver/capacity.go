//go:build linux

package driver

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ledger accounts the capacity given out: every durable volume its
// footprint (its capacity; an encrypted one's plus its LUKS2 header,
// volume.imageSize), every durable snapshot the bytes its data takes on disk
// (snapshot.DiskBytes), plus the reservations of writes not yet durable.
//
// The durable part is a running total fed by the journal (journal.KV.Watch):
// every record's charge is added when its write is durable and taken off
// when its delete is, so it follows what the disk holds — a create whose
// journal commit failed after the driver answered is not counted once its
// reservation is gone, a delete whose release failed still is — a check
// costs the same at any number of records, and a restart rebuilds the
// total from the records.
//
// A create or expansion reserves the total its object will be charged
// before it touches the backend — the check and the reservation are one
// step under the ledger's lock, so concurrent calls can never together pass
// a limit none of them alone exceeds. The reservation stays until the
// record that charges as much is durable (it is then dropped at the next
// check), until the call fails (cancel) or its object is deleted
// (release), or, for a create whose answer was never made durable and
// never retried, until the sweep releases it with the journal's
// reservation. A restart drops the reservations of calls that never
// answered; their retries reserve again.
type ledger struct {
	// durable is the charges of every durable record, kept by the
	// journal's watch; charge returns one key's (0 when there is none).
	durable atomic.Int64
	charge  func(key string) int64
	// attached counts the durable volumes published to a node (the
	// attach limit's count), kept by the same watch.
	attached atomic.Int64
	// gen counts the watches' changes to durable, twice each (odd while
	// one is under way): a read of the charges and the total between two
	// equal even values saw no record become durable.
	gen atomic.Uint64

	mu       sync.Mutex
	reserved map[string]int64 // key → total charge being written
}

// Ledger keys: a volume's ID, or snapshotKey of a snapshot's.
func snapshotKey(id string) string { return "snapshot/" + id }

func newLedger(st *store) *ledger {
	l := &ledger{
		charge: func(key string) int64 {
			if id, ok := strings.CutPrefix(key, "snapshot/"); ok {
				x, _ := st.snapshot(id)
				return x.DiskBytes
			}
			v, _ := st.volume(key)
			return v.imageSize(v.Capacity)
		},
		reserved: map[string]int64{},
	}
	// A record that does not decode failed the start already; one written
	// since that does not charges nothing. Each watch runs one change at
	// a time, under the journal's lock.
	var x struct {
		DiskBytes int64 `json:"diskBytes"`
	}
	chargeOf := func(raw []byte, field *int64, into any) int64 {
		if raw == nil {
			return 0
		}
		*field = 0
		_ = json.Unmarshal(raw, into)
		return *field
	}
	// A volume's charge (imageSize: an encrypted one pays its header),
	// and 1 if it is attached.
	volumeOf := func(raw []byte) (charge, attached int64) {
		if raw == nil {
			return 0, 0
		}
		// The record's own decoder (volume.decodeRecord): a fifth of
		// encoding/json's cost, which every create and delete paid here.
		var v volume
		_ = v.decodeRecord("", raw)
		if v.AttachedTo != "" {
			attached = 1
		}
		return v.imageSize(v.Capacity), attached
	}
	st.kvVolumes.Watch(func(_ string, old, new []byte) {
		c0, a0 := volumeOf(old)
		c1, a1 := volumeOf(new)
		l.gen.Add(1)
		l.durable.Add(c1 - c0)
		l.attached.Add(a1 - a0)
		l.gen.Add(1)
	})
	st.kvSnapshots.Watch(func(_ string, old, new []byte) {
		c := chargeOf(new, &x.DiskBytes, &x) - chargeOf(old, &x.DiskBytes, &x)
		l.gen.Add(1)
		l.durable.Add(c)
		l.gen.Add(1)
	})
	return l
}

// account returns the bytes charged (durable records and reservations
// beyond them) and the part of it reserved but not yet durable, dropping
// reservations durable records now cover. Called with l.mu held.
//
// Records become durable outside the ledger's lock (at the journal's
// commit, which updates the total with the records under the journal's
// lock, where the watches run), so the total and the reserved keys'
// charges are read as one consistent view: no watch may have run between
// the first charge read and the last (gen, a sequence count, is the same
// even number before and after), else a record that became durable in
// between could be counted in neither (its charge covering the
// reservation, its bytes missing from the sum) and a concurrent create
// could pass the limit. Each charge is then read once, where comparing
// two reads of every charge cost a create two journal reads per call in
// flight. After a few disturbed reads the charges are compared as
// before; after more, the earlier charges are used, which can only count
// a record twice (refusing, never overcommitting).
func (l *ledger) account() (used, inflight int64) {
	charges := func() map[string]int64 {
		m := make(map[string]int64, len(l.reserved))
		for k := range l.reserved {
			m[k] = l.charge(k)
		}
		return m
	}
	var before map[string]int64
	for try := 0; ; try++ {
		g := l.gen.Load()
		before = charges()
		used = l.durable.Load()
		if try < 4 {
			if g%2 == 0 && l.gen.Load() == g {
				break
			}
			continue
		}
		if try == 12 || maps.Equal(before, charges()) {
			break
		}
	}
	for k, r := range l.reserved {
		extra := r - before[k]
		if extra <= 0 {
			delete(l.reserved, k)
			continue
		}
		used += extra
		inflight += extra
	}
	return used, inflight
}

// reserve sets key's reservation to total bytes when the growth over what
// key is charged now fits in avail(used, inflight) — the bytes still free
// given what is accounted — and fails with ResourceExhausted otherwise.
func (l *ledger) reserve(key string, total int64, avail func(used, inflight int64) int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	used, inflight := l.account()
	now := max(l.charge(key), l.reserved[key])
	if grow := total - now; grow > 0 {
		if free := avail(used, inflight); grow > free {
			return status.Errorf(codes.ResourceExhausted, "requested %d bytes, only %d bytes of capacity left", grow, max(free, 0))
		}
	}
	l.reserved[key] = max(l.reserved[key], total)
	return nil
}

// add reserves total bytes for key whether they fit or not.
func (l *ledger) add(key string, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reserved[key] = max(l.reserved[key], total)
}

// set makes key's reservation total bytes, up or down, without a check:
// the bytes are on disk already (a snapshot's measured size).
func (l *ledger) set(key string, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reserved[key] = total
}

// commit says key's record was written (or deferred into the call's
// journal commit): its reservation stays until the record is durable,
// which the next check sees.
func (l *ledger) commit(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r, ok := l.reserved[key]; ok && r <= l.charge(key) {
		delete(l.reserved, key)
	}
}

// cancel drops key's reservation: its call failed.
func (l *ledger) cancel(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.reserved, key)
}

// release drops key's reservation: its object is deleted (its durable
// record counts until the delete is durable).
func (l *ledger) release(key string) { l.cancel(key) }

// holds reports whether key has a reservation.
func (l *ledger) holds(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.reserved[key]
	return ok
}

// available is avail applied to the current accounting.
func (l *ledger) available(avail func(used, inflight int64) int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return avail(l.account())
}

// reserveCapacity reserves a total charge of bytes for ledger key (see
// ledger.reserve). The caller commits with d.ledger.commit after the
// metadata write or cancels with d.ledger.cancel on failure.
func (d *Driver) reserveCapacity(key string, bytes int64) error {
	return d.ledger.reserve(key, bytes, d.availableGiven)
}

// available is the capacity not yet given out.
func (d *Driver) available() int64 { return d.ledger.available(d.availableGiven) }

// availableGiven is the capacity left when used bytes are accounted: with
// Options.Capacity, what remains of it; without, the free space of the
// state directory's filesystem less what running creates reserved but may
// not have written yet (a committed volume's data is in the free space
// already, or will be as it fills; a snapshot's data is there already).
func (d *Driver) availableGiven(used, inflight int64) int64 {
	if d.opts.Capacity > 0 {
		return max(0, d.opts.Capacity-used)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(d.opts.StateDir, &st); err != nil {
		return 0
	}
	return max(0, int64(st.Bavail)*int64(st.Bsize)-inflight)
}

// measureSnapshots runs at start: a snapshot recorded without its bytes on
// disk (by a version that did not charge snapshots) is measured and its
// record rewritten, so the ledger charges it from now on. What cannot be
// measured is logged and left uncharged.
func (d *Driver) measureSnapshots(ctx context.Context) {
	for _, x := range d.store.sortedSnapshots() {
		if x.DiskBytes != 0 {
			continue
		}
		b, err := diskBytes(ctx, d.snapshotPath(x.ID, x.Kind), x.Kind)
		if err == nil && b > 0 {
			x.DiskBytes = b
			err = d.store.putSnapshot(ctx, &x)
		}
		if err != nil {
			d.log.Warn("could not charge a snapshot its bytes on disk", "snapshot", x.ID, "error", err)
		}
	}
}

//go:build linux

package driver

import (
	"sync"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ledger accounts the capacity given to volumes. A create or expansion
// reserves its bytes before it touches the backend — the check and the
// reservation are one step under the ledger's lock, so concurrent calls
// can never together pass a limit none of them alone exceeds — and commits
// them once the volume's metadata is written, or cancels them when it
// fails. Committed bytes are rebuilt from the journal's volume records at
// start, so a crash loses only the reservations of calls that never
// answered (their retries reserve again).
type ledger struct {
	mu        sync.Mutex
	committed map[string]int64 // volume ID → capacity, as in the store
	pending   map[string]int64 // volume ID → bytes reserved by a running call
	used      int64            // sum of committed and pending
	inflight  int64            // sum of pending
}

func newLedger(vols []volume) *ledger {
	l := &ledger{committed: map[string]int64{}, pending: map[string]int64{}}
	for _, v := range vols {
		l.committed[v.ID] = v.Capacity
		l.used += v.Capacity
	}
	return l
}

// reserve adds bytes for volume id as pending when they fit in
// avail(used, inflight) — the bytes still free given what is accounted —
// and fails with ResourceExhausted otherwise.
func (l *ledger) reserve(id string, bytes int64, avail func(used, inflight int64) int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if free := avail(l.used, l.inflight); bytes > free {
		return status.Errorf(codes.ResourceExhausted, "requested %d bytes, only %d bytes of capacity left", bytes, max(free, 0))
	}
	l.pending[id] += bytes
	l.used += bytes
	l.inflight += bytes
	return nil
}

// add reserves bytes for volume id as pending whether they fit or not.
func (l *ledger) add(id string, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pending[id] += bytes
	l.used += bytes
	l.inflight += bytes
}

// commit turns id's pending bytes into part of its committed capacity.
func (l *ledger) commit(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.pending[id]; ok {
		l.committed[id] += b
		l.inflight -= b
		delete(l.pending, id)
	}
}

// cancel gives id's pending bytes back.
func (l *ledger) cancel(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used -= l.pending[id]
	l.inflight -= l.pending[id]
	delete(l.pending, id)
}

// release gives back everything id holds, committed and pending: its
// volume was deleted.
func (l *ledger) release(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.used -= l.committed[id] + l.pending[id]
	l.inflight -= l.pending[id]
	delete(l.committed, id)
	delete(l.pending, id)
}

// available is avail applied to the current accounting.
func (l *ledger) available(avail func(used, inflight int64) int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return avail(l.used, l.inflight)
}

// reserveCapacity reserves bytes for volume id (see ledger.reserve). The
// caller commits them with d.ledger.commit after the metadata write or
// cancels them with d.ledger.cancel on failure.
func (d *Driver) reserveCapacity(id string, bytes int64) error {
	return d.ledger.reserve(id, bytes, d.availableGiven)
}

// available is the capacity not yet given to volumes.
func (d *Driver) available() int64 { return d.ledger.available(d.availableGiven) }

// availableGiven is the capacity left when used bytes are accounted: with
// Options.Capacity, what remains of it; without, the free space of the
// state directory's filesystem less what running creates reserved but may
// not have written yet (a committed volume's data is in the free space
// already, or will be as it fills).
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

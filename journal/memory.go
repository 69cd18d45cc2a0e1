package journal

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// Memory is a Journal kept in memory. It forgets everything when the
// process exits, so it makes retries idempotent only within one process
// lifetime: use it for tests and for drivers whose backend is itself the
// durable journal. The zero value is not usable; call NewMemory.
type Memory struct {
	mu    sync.Mutex
	names map[Kind]map[string]*Record
	ids   map[Kind]map[string]string // id → name
}

// NewMemory returns an empty in-memory journal.
func NewMemory() *Memory {
	j := &Memory{names: map[Kind]map[string]*Record{}, ids: map[Kind]map[string]string{}}
	for k := KindVolume; k <= lastKind; k++ {
		j.names[k] = map[string]*Record{}
		j.ids[k] = map[string]string{}
	}
	return j
}

func copyRecord(r *Record) Record {
	c := *r
	c.Fingerprint = bytes.Clone(r.Fingerprint)
	c.Response = bytes.Clone(r.Response)
	return c
}

// Reserve implements Journal.
func (j *Memory) Reserve(ctx context.Context, r Reservation) (Record, error) {
	if err := checkReservation(ctx, r); err != nil {
		return Record{}, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if rec, ok := j.names[r.Kind][r.Name]; ok {
		if !sameFingerprint(rec.Fingerprint, r.Fingerprint) {
			return Record{}, mismatch(*rec)
		}
		return copyRecord(rec), nil
	}
	if owner, ok := j.ids[r.Kind][r.ID]; ok {
		return Record{}, idTaken(r.Kind, r.ID, owner, r.Name)
	}
	rec := &Record{Kind: r.Kind, Name: r.Name, ID: r.ID, Fingerprint: bytes.Clone(r.Fingerprint), Reserved: time.Now()}
	j.names[r.Kind][r.Name] = rec
	j.ids[r.Kind][r.ID] = r.Name
	out := copyRecord(rec)
	out.Fresh = true
	return out, nil
}

// Commit implements Journal.
func (j *Memory) Commit(ctx context.Context, kind Kind, name, id string, response []byte) error {
	if err := checkArgs(ctx, kind, name); err != nil {
		return err
	}
	if err := checkArgs(ctx, kind, id); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	rec, ok := j.names[kind][name]
	if !ok {
		return noReservation(kind, name)
	}
	if id != rec.ID {
		if owner, taken := j.ids[kind][id]; taken && owner != name {
			return idTaken(kind, id, owner, name)
		}
		delete(j.ids[kind], rec.ID)
		j.ids[kind][id] = name
		rec.ID = id
	}
	rec.Committed = true
	rec.Response = bytes.Clone(response)
	return nil
}

// LookupName implements Journal.
func (j *Memory) LookupName(ctx context.Context, kind Kind, name string) (Record, bool, error) {
	if err := checkArgs(ctx, kind, name); err != nil {
		return Record{}, false, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	rec, ok := j.names[kind][name]
	if !ok {
		return Record{}, false, nil
	}
	return copyRecord(rec), true, nil
}

// LookupID implements Journal.
func (j *Memory) LookupID(ctx context.Context, kind Kind, id string) (Record, bool, error) {
	if err := checkArgs(ctx, kind, id); err != nil {
		return Record{}, false, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	name, ok := j.ids[kind][id]
	if !ok {
		return Record{}, false, nil
	}
	return copyRecord(j.names[kind][name]), true, nil
}

// Release implements Journal.
func (j *Memory) Release(ctx context.Context, kind Kind, id string) error {
	if err := checkArgs(ctx, kind, id); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if name, ok := j.ids[kind][id]; ok {
		delete(j.ids[kind], id)
		delete(j.names[kind], name)
	}
	return nil
}

// Uncommitted implements Lister.
func (j *Memory) Uncommitted(ctx context.Context, kind Kind, reservedBefore time.Time) ([]Record, error) {
	if err := checkArgs(ctx, kind, "-"); err != nil {
		return nil, err
	}
	j.mu.Lock()
	var out []Record
	for _, rec := range j.names[kind] {
		if !rec.Committed && rec.Reserved.Before(reservedBefore) {
			out = append(out, copyRecord(rec))
		}
	}
	j.mu.Unlock()
	sortOldestFirst(out)
	return out, nil
}

func sortOldestFirst(recs []Record) {
	slices.SortFunc(recs, func(a, b Record) int { return a.Reserved.Compare(b.Reserved) })
}

// Records implements RecordLister.
func (j *Memory) Records(ctx context.Context, kind Kind) ([]Record, error) {
	if err := checkArgs(ctx, kind, "-"); err != nil {
		return nil, err
	}
	j.mu.Lock()
	out := make([]Record, 0, len(j.names[kind]))
	for _, rec := range j.names[kind] {
		out = append(out, copyRecord(rec))
	}
	j.mu.Unlock()
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

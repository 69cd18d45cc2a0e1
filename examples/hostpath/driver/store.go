//go:build linux

package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/csikit/csikit/journal"
)

// kind is how a volume stores its data.
type kind string

const (
	kindDir   kind = "directory"  // a directory; capacity enforced by a project quota where the filesystem has them
	kindBlock kind = "block"      // a loop-backed file used as a raw block device
	kindFS    kind = "filesystem" // ext4 or xfs on a loop-backed file
)

// volume is the metadata of one volume.
type volume struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Capacity   int64             `json:"capacity"`
	Kind       kind              `json:"kind"`
	FSType     string            `json:"fsType,omitempty"`
	Source     string            `json:"source,omitempty"` // "snapshot:<id>" or "volume:<id>"
	Params     map[string]string `json:"params,omitempty"`
	AttachedTo string            `json:"attachedTo,omitempty"`
	AttachedRO bool              `json:"attachedRO,omitempty"`
	Ephemeral  bool              `json:"ephemeral,omitempty"`
	// Lazy marks a directory volume whose directory is not made yet: an
	// empty directory volume is made at its first stage (materialize),
	// not by CreateVolume, so a volume created and deleted unused costs
	// no directory operations. Until then its data is empty: a snapshot
	// or clone of it is empty too. A volume whose directory is gone and
	// that is not Lazy has lost its data.
	Lazy bool `json:"lazy,omitempty"`
	// ProjectID is the filesystem project limiting a directory volume to
	// its capacity (0: none, the filesystem has no project quotas).
	ProjectID uint32    `json:"projectId,omitempty"`
	Created   time.Time `json:"created"`
	// Published lists the target paths the volume is published at on
	// this node (to enforce SINGLE_NODE_SINGLE_WRITER).
	Published []string `json:"published,omitempty"`
}

// snapshot is the metadata of one snapshot.
type snapshot struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	SourceID string `json:"sourceId"`
	Size     int64  `json:"size"`
	// DiskBytes is the space the snapshot's data takes on disk, measured
	// when it was made: what the capacity ledger charges for it.
	DiskBytes int64     `json:"diskBytes,omitempty"`
	Kind      kind      `json:"kind"`
	FSType    string    `json:"fsType,omitempty"`
	GroupID   string    `json:"groupId,omitempty"`
	Created   time.Time `json:"created"`
}

// store is the driver's metadata, kept durably in KV spaces of the SDK's
// file journal, so its writes share the journal's group commit: the
// metadata write of a CreateVolume and the journal's own reserve and commit
// of concurrent calls are fsynced together.
//
// Reads see only what is durable. Inside the create and delete calls the
// writes are deferred into the journal's commit or release
// (journal.KV.DeferPut), which may still fail (a full disk) after the
// driver answered; an in-memory copy updated at the write would then hold
// a volume the disk does not, and the CO's retry would succeed from memory
// without redoing the write. So nothing is published before it is durable:
// the KV's own view (which changes only once a write reached the disk) is
// the truth, and the store decodes from it at every read. The one
// exception is a call's
// own writes, which it reads back through the *In methods with its ctx.
type store struct {
	kvVolumes, kvSnapshots, kvGroups *journal.KV

	volumes   *records[volume]
	snapshots *records[snapshot]
	groups    *records[group]
}

// group is a volume group snapshot.
type group struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	SnapshotIDs []string  `json:"snapshotIds"`
	Created     time.Time `json:"created"`
}

func openStore(j *journal.File) (*store, error) {
	s := &store{}
	var err error
	if s.kvVolumes, err = j.KV("hostpath/volumes"); err != nil {
		return nil, err
	}
	if s.kvSnapshots, err = j.KV("hostpath/snapshots"); err != nil {
		return nil, err
	}
	if s.kvGroups, err = j.KV("hostpath/groups"); err != nil {
		return nil, err
	}
	s.volumes = newRecords[volume](s.kvVolumes)
	s.snapshots = newRecords[snapshot](s.kvSnapshots)
	s.groups = newRecords[group](s.kvGroups)
	// Every record must decode: a corrupt one fails the start, not a
	// later read. The volumes are checked by the driver's start, in the
	// one pass over them it makes anyway (startVolumes).
	for _, check := range []func() error{s.snapshots.check, s.groups.check} {
		if err := check(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// records is one KV space of JSON records, decoded at each read: a
// cache of decoded copies held every record twice more in memory (its
// bytes and its decoded form) for a decode of a few microseconds.
type records[T any] struct {
	kv *journal.KV
}

func newRecords[T any](kv *journal.KV) *records[T] {
	return &records[T]{kv: kv}
}

// decode returns the record stored as raw under key. raw is not retained.
func (r *records[T]) decode(key string, raw []byte) (T, error) {
	return decodeAs[T](r.kv, key, raw)
}

// decodeAs decodes the record stored as raw under key in kv into an L:
// a T, or a struct of some of T's fields, whose decoding skips the others.
func decodeAs[L any](kv *journal.KV, key string, raw []byte) (L, error) {
	var x L
	err := decodeInto(kv, key, raw, &x)
	return x, err
}

// recordDecoder is a record type with a decoder of its own.
type recordDecoder interface {
	decodeRecord(key string, raw []byte) error
}

// decodeInto is decodeAs into *x, which it zeroes first: a walk decodes
// every record into one L rather than allocating one each. A decoder of
// its own (decodeRecord) may share key's string rather than copy it.
func decodeInto[L any](kv *journal.KV, key string, raw []byte, x *L) error {
	var err error
	if d, ok := any(x).(recordDecoder); ok {
		err = d.decodeRecord(key, raw) // its own decoder
	} else {
		*x = *new(L)
		err = json.Unmarshal(raw, x)
	}
	if err != nil {
		return fmt.Errorf("hostpath: load %s record %q: %w", kv, key, err)
	}
	return nil
}

// get returns the record under id as ctx sees it: the durable one, or the
// last write the call of ctx deferred. A cancelled ctx still reads.
func (r *records[T]) get(ctx context.Context, id string) (T, bool) {
	raw, ok, err := r.kv.Get(context.WithoutCancel(ctx), id)
	if err != nil || !ok {
		return *new(T), false
	}
	x, err := r.decode(id, raw)
	return x, err == nil
}

// each calls fn with every durable record in ID order. fn must not use
// the store's KV spaces.
func (r *records[T]) each(fn func(id string, x *T)) error {
	return r.eachAfter("", func(id string, x *T) bool { fn(id, x); return true })
}

// eachAfter calls fn with the durable records of IDs after after ("" for
// all) in ID order, until fn returns false. It costs the records visited.
func (r *records[T]) eachAfter(after string, fn func(id string, x *T) bool) error {
	return eachAfterAs(r, after, fn)
}

// eachAfterAs is eachAfter decoding each record into an L: T, or a
// struct of the fields of T the caller needs. x is one L reused for every
// record (fn copies what it keeps); id and the strings in x are the
// caller's to keep.
func eachAfterAs[L, T any](r *records[T], after string, fn func(id string, x *L) bool) error {
	errStop := errors.New("stop")
	x := new(L)
	err := r.kv.ForEachAfter(after, func(k string, v []byte) error {
		if err := decodeInto(r.kv, k, v, x); err != nil {
			return err
		}
		if !fn(k, x) {
			return errStop
		}
		return nil
	})
	if err == errStop {
		err = nil
	}
	return err
}

// scan calls fn with every durable record in no particular order (that of
// the file, read sequentially: the fast way to visit all of them). fn
// must not use the store's KV spaces.
func (r *records[T]) scan(fn func(id string, x *T)) error {
	return r.kv.Scan(func(k string, v []byte) error {
		x, err := r.decode(k, v)
		if err == nil {
			fn(k, &x)
		}
		return err
	})
}

func (r *records[T]) check() error { return r.scan(func(string, *T) {}) }

// all returns copies of the durable records, in ID order.
func (r *records[T]) all() []T {
	var out []T
	if err := r.each(func(_ string, x *T) { out = append(out, *x) }); err != nil {
		return out // a record that stopped decoding: what was read
	}
	return out
}

// ping reads the store, for health checks.
func (s *store) ping() error {
	errStop := errors.New("stop")
	if err := s.kvVolumes.ForEach(func(string, []byte) error { return errStop }); err != nil && err != errStop {
		return err
	}
	return nil
}

// put writes one record. Inside CreateVolume, CreateSnapshot and
// CreateVolumeGroupSnapshot the write is deferred
// (journal.KV.DeferPut) into the journal's commit of the call — one
// atomic transaction, one flush — and is durable before the call answers
// success; elsewhere it is durable when put returns. Either way reads
// (other than the call's own) see it only once it is durable.
func put[T any](ctx context.Context, kv *journal.KV, id string, x *T) error {
	raw, err := json.Marshal(x)
	if err != nil {
		return err
	}
	if err := kv.DeferPut(ctx, id, raw); err != nil {
		return fmt.Errorf("hostpath: save %s %s: %w", kv, id, err)
	}
	return nil
}

// del removes one record, deferred into the journal's release inside the
// Delete calls (so data removal and the metadata delete reach the disk in
// that order), durably at once elsewhere. Until the delete is durable the
// record stays visible, so a retry after a failed release deletes again.
func del(ctx context.Context, kv *journal.KV, id string) error {
	if err := kv.DeferDelete(ctx, id); err != nil {
		return fmt.Errorf("hostpath: delete %s %s: %w", kv, id, err)
	}
	return nil
}

func (s *store) putVolume(ctx context.Context, v *volume) error {
	return put(ctx, s.kvVolumes, v.ID, v)
}
func (s *store) putSnapshot(ctx context.Context, x *snapshot) error {
	return put(ctx, s.kvSnapshots, x.ID, x)
}
func (s *store) putGroup(ctx context.Context, g *group) error {
	return put(ctx, s.kvGroups, g.ID, g)
}
func (s *store) delVolume(ctx context.Context, id string) error {
	return del(ctx, s.kvVolumes, id)
}
func (s *store) delSnapshot(ctx context.Context, id string) error {
	return del(ctx, s.kvSnapshots, id)
}
func (s *store) delGroup(ctx context.Context, id string) error {
	return del(ctx, s.kvGroups, id)
}

// volume returns a copy of the volume's durable metadata.
func (s *store) volume(id string) (volume, bool) {
	return s.volumes.get(context.Background(), id)
}

// hasVolume and hasSnapshot report whether the object has a durable
// record, from the journal's index alone (no read, no decode).
func (s *store) hasVolume(id string) bool   { return s.kvVolumes.Has(id) }
func (s *store) hasSnapshot(id string) bool { return s.kvSnapshots.Has(id) }

// snapshot returns a copy of the snapshot's durable metadata.
func (s *store) snapshot(id string) (snapshot, bool) {
	return s.snapshots.get(context.Background(), id)
}

// snapshotIn is snapshot as the call of ctx sees it: with its own
// deferred writes.
func (s *store) snapshotIn(ctx context.Context, id string) (snapshot, bool) {
	return s.snapshots.get(ctx, id)
}

// group returns a copy of the group snapshot's durable metadata.
func (s *store) group(id string) (group, bool) {
	return s.groups.get(context.Background(), id)
}

// sortedSnapshots returns copies of all durable snapshots, sorted by ID.
func (s *store) sortedSnapshots() []snapshot { return s.snapshots.all() }

//go:build linux

package driver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/csikit/csikit/idempotency"
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
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	SourceID string    `json:"sourceId"`
	Size     int64     `json:"size"`
	Kind     kind      `json:"kind"`
	FSType   string    `json:"fsType,omitempty"`
	GroupID  string    `json:"groupId,omitempty"`
	Created  time.Time `json:"created"`
}

// store keeps metadata in memory for reads and durably in KV spaces of the
// SDK's file journal, so its writes share the journal's group commit: the
// metadata write of a CreateVolume and the journal's own reserve and commit
// of concurrent calls are fsynced together.
type store struct {
	kvVolumes, kvSnapshots, kvGroups *idempotency.KV

	mu        sync.RWMutex
	volumes   map[string]*volume
	snapshots map[string]*snapshot
	groups    map[string]*group
}

// group is a volume group snapshot.
type group struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	SnapshotIDs []string  `json:"snapshotIds"`
	Created     time.Time `json:"created"`
}

func openStore(j *idempotency.FileJournal) (*store, error) {
	s := &store{volumes: map[string]*volume{}, snapshots: map[string]*snapshot{}, groups: map[string]*group{}}
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
	if err := load(s.kvVolumes, s.volumes); err != nil {
		return nil, err
	}
	if err := load(s.kvSnapshots, s.snapshots); err != nil {
		return nil, err
	}
	if err := load(s.kvGroups, s.groups); err != nil {
		return nil, err
	}
	return s, nil
}

func load[T any](kv *idempotency.KV, into map[string]*T) error {
	return kv.ForEach(func(k string, v []byte) error {
		var x T
		if err := json.Unmarshal(v, &x); err != nil {
			return fmt.Errorf("hostpath: load %s record %q: %w", kv, k, err)
		}
		into[k] = &x
		return nil
	})
}

// ping reads the store, for health checks.
func (s *store) ping() error {
	errStop := errors.New("stop")
	if err := s.kvVolumes.ForEach(func(string, []byte) error { return errStop }); err != nil && err != errStop {
		return err
	}
	return nil
}

// put writes one record, then publishes it in memory. Inside CreateVolume,
// CreateSnapshot and CreateVolumeGroupSnapshot the write is deferred
// (idempotency.KV.DeferPut) into the journal's commit of the call — one
// atomic transaction, one flush — and is durable before the call answers;
// elsewhere it is durable when put returns.
func put[T any](ctx context.Context, s *store, kv *idempotency.KV, id string, x *T, mem map[string]*T) error {
	raw, err := json.Marshal(x)
	if err != nil {
		return err
	}
	if err := kv.DeferPut(ctx, id, raw); err != nil {
		return fmt.Errorf("hostpath: save %s %s: %w", kv, id, err)
	}
	s.mu.Lock()
	mem[id] = x
	s.mu.Unlock()
	return nil
}

// del removes one record, deferred into the journal's release inside the
// Delete calls (so data removal and the metadata delete reach the disk in
// that order), durably at once elsewhere.
func del[T any](ctx context.Context, s *store, kv *idempotency.KV, id string, mem map[string]*T) error {
	if err := kv.DeferDelete(ctx, id); err != nil {
		return fmt.Errorf("hostpath: delete %s %s: %w", kv, id, err)
	}
	s.mu.Lock()
	delete(mem, id)
	s.mu.Unlock()
	return nil
}

func (s *store) putVolume(ctx context.Context, v *volume) error {
	return put(ctx, s, s.kvVolumes, v.ID, v, s.volumes)
}
func (s *store) putSnapshot(ctx context.Context, x *snapshot) error {
	return put(ctx, s, s.kvSnapshots, x.ID, x, s.snapshots)
}
func (s *store) putGroup(ctx context.Context, g *group) error {
	return put(ctx, s, s.kvGroups, g.ID, g, s.groups)
}
func (s *store) delVolume(ctx context.Context, id string) error {
	return del(ctx, s, s.kvVolumes, id, s.volumes)
}
func (s *store) delSnapshot(ctx context.Context, id string) error {
	return del(ctx, s, s.kvSnapshots, id, s.snapshots)
}
func (s *store) delGroup(ctx context.Context, id string) error {
	return del(ctx, s, s.kvGroups, id, s.groups)
}

// volume returns a copy of the volume's metadata.
func (s *store) volume(id string) (volume, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.volumes[id]
	if !ok {
		return volume{}, false
	}
	return *v, true
}

func (s *store) snapshot(id string) (snapshot, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	x, ok := s.snapshots[id]
	if !ok {
		return snapshot{}, false
	}
	return *x, true
}

func (s *store) group(id string) (group, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g, ok := s.groups[id]
	if !ok {
		return group{}, false
	}
	return *g, true
}

// sortedVolumes returns copies of all volumes, sorted by ID.
func (s *store) sortedVolumes() []volume {
	s.mu.RLock()
	out := make([]volume, 0, len(s.volumes))
	for _, v := range s.volumes {
		out = append(out, *v)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// sortedSnapshots returns copies of all snapshots, sorted by ID.
func (s *store) sortedSnapshots() []snapshot {
	s.mu.RLock()
	out := make([]snapshot, 0, len(s.snapshots))
	for _, x := range s.snapshots {
		out = append(out, *x)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

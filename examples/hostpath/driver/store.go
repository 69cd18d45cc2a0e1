//go:build linux

package driver

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// kind is how a volume stores its data.
type kind string

const (
	kindDir   kind = "directory"  // a directory; capacity is accounted, not enforced
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
	Created    time.Time         `json:"created"`
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

var (
	bucketVolumes   = []byte("volumes")
	bucketSnapshots = []byte("snapshots")
	bucketGroups    = []byte("groups")
)

// store keeps metadata in memory for reads and in a bbolt file for
// durability. Writes go through bolt's Batch, which coalesces concurrent
// writers into one fsynced transaction.
type store struct {
	db *bolt.DB

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

func openStore(path string) (*store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, fmt.Errorf("hostpath: open state %s: %w", path, err)
	}
	db.MaxBatchDelay = 200 * time.Microsecond
	s := &store{db: db, volumes: map[string]*volume{}, snapshots: map[string]*snapshot{}, groups: map[string]*group{}}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketVolumes, bucketSnapshots, bucketGroups} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if err := load(tx, bucketVolumes, s.volumes); err != nil {
			return err
		}
		if err := load(tx, bucketSnapshots, s.snapshots); err != nil {
			return err
		}
		return load(tx, bucketGroups, s.groups)
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("hostpath: load state %s: %w", path, err)
	}
	return s, nil
}

func load[T any](tx *bolt.Tx, bucket []byte, into map[string]*T) error {
	return tx.Bucket(bucket).ForEach(func(k, v []byte) error {
		var x T
		if err := json.Unmarshal(v, &x); err != nil {
			return fmt.Errorf("record %q: %w", k, err)
		}
		into[string(k)] = &x
		return nil
	})
}

func (s *store) close() error { return s.db.Close() }

// put writes one record durably, then publishes it in memory.
func put[T any](s *store, bucket []byte, id string, x *T, mem map[string]*T) error {
	raw, err := json.Marshal(x)
	if err != nil {
		return err
	}
	if err := s.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put([]byte(id), raw) }); err != nil {
		return fmt.Errorf("hostpath: save %s %s: %w", bucket, id, err)
	}
	s.mu.Lock()
	mem[id] = x
	s.mu.Unlock()
	return nil
}

// del removes one record durably.
func del[T any](s *store, bucket []byte, id string, mem map[string]*T) error {
	if err := s.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Delete([]byte(id)) }); err != nil {
		return fmt.Errorf("hostpath: delete %s %s: %w", bucket, id, err)
	}
	s.mu.Lock()
	delete(mem, id)
	s.mu.Unlock()
	return nil
}

func (s *store) putVolume(v *volume) error     { return put(s, bucketVolumes, v.ID, v, s.volumes) }
func (s *store) putSnapshot(x *snapshot) error { return put(s, bucketSnapshots, x.ID, x, s.snapshots) }
func (s *store) putGroup(g *group) error       { return put(s, bucketGroups, g.ID, g, s.groups) }
func (s *store) delVolume(id string) error     { return del(s, bucketVolumes, id, s.volumes) }
func (s *store) delSnapshot(id string) error   { return del(s, bucketSnapshots, id, s.snapshots) }
func (s *store) delGroup(id string) error      { return del(s, bucketGroups, id, s.groups) }

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

// usedBytes sums the capacity of all volumes.
func (s *store) usedBytes() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n int64
	for _, v := range s.volumes {
		n += v.Capacity
	}
	return n
}

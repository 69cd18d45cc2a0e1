package kvlog

import (
	"hash/maphash"
	"slices"
	"strings"
	"unsafe"
)

// keyset is one bucket: its keys, where each key's value is, and the keys
// in order, so that a walk from a key costs the keys it visits rather than
// a sort of the whole bucket.
//
// It holds no pointer per key, so the garbage collector has nothing to
// mark in it: at 100,000 hostpath volumes (300,000 keys) a map of strings
// and sorted chunks of string headers were a 22 MB heap that every GC
// cycle marked, 8–20 ms of a collector's work that stalled pages of a
// listing. Here the key bytes are packed into blocks of keyBlock bytes,
// each key is an entry (block, position, length, value location) in one
// slice, a map from the key's hash to its entry (integers only) finds a
// key, and the order is sorted chunks of entry numbers of at most
// chunkMax. An insert or delete moves at most a chunk's worth of
// numbers; a seek is two binary searches.
//
// The key strings handed out (ascend, all) point into the blocks, which
// are only ever appended to: a string stays valid however long it is
// kept. A deleted key's bytes stay in its block until the blocks hold as
// many dead bytes as live ones; then the live keys are copied into new
// blocks (the old ones are freed once no string points into them).
type keyset struct {
	blocks [][]byte          // key bytes; never modified below len
	ents   []entry           // by entry number; dead ones listed in free
	free   []uint32          // dead entry numbers, for reuse
	byHash map[uint64]uint32 // key hash → first entry number with that hash
	chunks [][]uint32        // entry numbers in key order, each chunk sorted and non-empty
	n      int               // live keys
	// misplaced counts this bucket's live values at or after DB.sorted
	// (see DB.misplaced): a bucket can be scattered while the store as a
	// whole is not, when its values were rewritten and others were not.
	misplaced int
	live      int // bytes of live keys
	dead      int // bytes of deleted keys still in the blocks
}

// entry is one key of a keyset.
type entry struct {
	blk, pos, klen uint32 // the key is blocks[blk][pos:pos+klen]
	next           uint32 // entry number+1 of the next key with the same hash; 0: none
	l              loc
}

const (
	chunkMax = 512
	// keyBlock is the size of a block of keys; a key over a sixteenth
	// of it gets a block of its own.
	keyBlock = 64 << 10
	deadEnt  = ^uint32(0) // blk of an entry not in use
)

var keySeed = maphash.MakeSeed()

// hashMask is ANDed into every key hash: tests narrow it to make keys
// share hashes.
var hashMask = ^uint64(0)

func keyHash(k string) uint64 { return maphash.String(keySeed, k) & hashMask }

func newKeyset() *keyset { return &keyset{byHash: map[uint64]uint32{}} }

// newKeysetSorted builds a keyset of distinct keys, sorted, with their
// values' locations.
func newKeysetSorted(keys []string, locs []loc) *keyset {
	s := &keyset{byHash: make(map[uint64]uint32, len(keys)), ents: make([]entry, 0, len(keys))}
	var ids []uint32
	for i, k := range keys {
		id := s.add(k, locs[i])
		if len(ids) == chunkMax/2 {
			s.chunks = append(s.chunks, ids)
			ids = nil
		}
		if ids == nil {
			ids = make([]uint32, 0, min(chunkMax/2, len(keys)-i))
		}
		ids = append(ids, id)
	}
	if len(ids) > 0 {
		s.chunks = append(s.chunks, ids)
	}
	return s
}

// key returns entry id's key, pointing into its block.
func (s *keyset) key(id uint32) string {
	e := &s.ents[id]
	if e.klen == 0 {
		return ""
	}
	return unsafe.String(&s.blocks[e.blk][e.pos], int(e.klen))
}

// store copies k into the blocks and returns where it is.
func (s *keyset) store(k string) (blk, pos uint32) {
	if len(k) > keyBlock/16 {
		s.blocks = append(s.blocks, []byte(k))
		return uint32(len(s.blocks) - 1), 0
	}
	last := len(s.blocks) - 1
	if last < 0 || cap(s.blocks[last])-len(s.blocks[last]) < len(k) {
		s.blocks = append(s.blocks, make([]byte, 0, keyBlock))
		last++
	}
	b := s.blocks[last]
	pos = uint32(len(b))
	s.blocks[last] = append(b, k...)
	return uint32(last), pos
}

// add stores a key known to be absent and links it into the hash map,
// not into the order; it returns its entry number.
func (s *keyset) add(k string, l loc) uint32 {
	blk, pos := s.store(k)
	e := entry{blk: blk, pos: pos, klen: uint32(len(k)), l: l}
	h := keyHash(k)
	if head, ok := s.byHash[h]; ok {
		e.next = head + 1
	}
	var id uint32
	if n := len(s.free); n > 0 {
		id = s.free[n-1]
		s.free = s.free[:n-1]
		s.ents[id] = e
	} else {
		id = uint32(len(s.ents))
		s.ents = append(s.ents, e)
	}
	s.byHash[h] = id
	s.n++
	s.live += len(k)
	return id
}

// find returns k's entry number.
func (s *keyset) find(k string) (uint32, bool) {
	if s == nil {
		return 0, false
	}
	id, ok := s.byHash[keyHash(k)]
	for ok {
		if s.key(id) == k {
			return id, true
		}
		next := s.ents[id].next
		id, ok = next-1, next != 0
	}
	return 0, false
}

// get returns where k's value is.
func (s *keyset) get(k string) (loc, bool) {
	id, ok := s.find(k)
	if !ok {
		return 0, false
	}
	return s.ents[id].l, true
}

// len returns the number of keys.
func (s *keyset) len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// put sets k's value location, adding k if it is new, and returns the
// one it replaced.
func (s *keyset) put(k string, l loc) (old loc, had bool) {
	if id, ok := s.find(k); ok {
		old, s.ents[id].l = s.ents[id].l, l
		return old, true
	}
	id := s.add(k, l)
	if len(s.chunks) == 0 {
		s.chunks = [][]uint32{{id}}
		return 0, false
	}
	ci := s.chunk(k)
	c := s.chunks[ci]
	j, _ := s.search(c, k)
	c = slices.Insert(c, j, id)
	if len(c) <= chunkMax {
		s.chunks[ci] = c
		return 0, false
	}
	half := len(c) / 2
	lo, hi := slices.Clone(c[:half]), slices.Clone(c[half:])
	s.chunks = slices.Insert(s.chunks, ci+1, hi)
	s.chunks[ci] = lo
	return 0, false
}

// del removes k if present and returns where its value was.
func (s *keyset) del(k string) (old loc, had bool) {
	id, ok := s.find(k)
	if !ok {
		return 0, false
	}
	ci := s.chunk(k)
	c := s.chunks[ci]
	j, _ := s.search(c, k)
	if c = slices.Delete(c, j, j+1); len(c) == 0 {
		s.chunks = slices.Delete(s.chunks, ci, ci+1)
	} else {
		s.chunks[ci] = c
	}
	// Unlink it from its hash chain.
	h := keyHash(k)
	e := s.ents[id]
	if head := s.byHash[h]; head == id {
		if e.next == 0 {
			delete(s.byHash, h)
		} else {
			s.byHash[h] = e.next - 1
		}
	} else {
		p := head
		for s.ents[p].next-1 != id {
			p = s.ents[p].next - 1
		}
		s.ents[p].next = e.next
	}
	s.ents[id] = entry{blk: deadEnt}
	s.free = append(s.free, id)
	s.n--
	s.live -= len(k)
	s.dead += len(k)
	if s.dead > s.live && s.dead > keyBlock {
		s.repack()
	}
	return e.l, true
}

// repack copies the live keys into new blocks, dropping the dead ones'
// bytes. The old blocks are left as they are, for the strings that point
// into them.
func (s *keyset) repack() {
	old := s.blocks
	s.blocks = nil
	for i := range s.ents {
		e := &s.ents[i]
		if e.blk == deadEnt {
			continue
		}
		var k string
		if e.klen > 0 {
			k = unsafe.String(&old[e.blk][e.pos], int(e.klen))
		}
		e.blk, e.pos = s.store(k)
	}
	s.dead = 0
}

// chunk returns the index of the chunk where k is or would go.
func (s *keyset) chunk(k string) int {
	i, _ := slices.BinarySearchFunc(s.chunks, k, func(c []uint32, k string) int {
		return strings.Compare(s.key(c[len(c)-1]), k)
	})
	return min(i, len(s.chunks)-1)
}

// search returns where k is or would go in chunk c.
func (s *keyset) search(c []uint32, k string) (int, bool) {
	return slices.BinarySearchFunc(c, k, func(id uint32, k string) int {
		return strings.Compare(s.key(id), k)
	})
}

// ascend calls fn with every key ≥ from, and where its value is, in key
// order until fn returns false.
func (s *keyset) ascend(from string, fn func(k string, l loc) bool) {
	if s == nil || len(s.chunks) == 0 {
		return
	}
	ci := s.chunk(from)
	j, _ := s.search(s.chunks[ci], from)
	for ; ci < len(s.chunks); ci, j = ci+1, 0 {
		for _, id := range s.chunks[ci][j:] {
			if !fn(s.key(id), s.ents[id].l) {
				return
			}
		}
	}
}

// setInOrder sets the value locations of all the keys, given in key
// order (as ascend("") visits them): a compaction's, which moved every
// value.
func (s *keyset) setInOrder(locs []loc) {
	i := 0
	for _, c := range s.chunks {
		for _, id := range c {
			s.ents[id].l = locs[i]
			i++
		}
	}
}

// all calls fn with every key and where its value is, in no order.
func (s *keyset) all(fn func(k string, l loc)) {
	if s == nil {
		return
	}
	for i := range s.ents {
		if s.ents[i].blk != deadEnt {
			fn(s.key(uint32(i)), s.ents[i].l)
		}
	}
}

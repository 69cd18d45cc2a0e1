package kvlog

import (
	"slices"
	"strings"
)

// index keeps one bucket's keys in order, so that a walk from a key costs
// the keys it visits rather than a sort of the whole bucket. The keys are
// held in sorted chunks of at most chunkMax: an insert or delete moves at
// most a chunk's worth of string headers, a seek is two binary searches.
// It shares the key strings with the bucket's map.
type index struct {
	chunks [][]string // each sorted, non-empty; chunk i's keys < chunk i+1's
}

const chunkMax = 512

// newIndex indexes keys, which must be distinct.
func newIndex(keys []string) *index {
	slices.Sort(keys)
	x := &index{}
	for len(keys) > 0 {
		n := min(len(keys), chunkMax/2)
		x.chunks = append(x.chunks, slices.Clip(keys[:n]))
		keys = keys[n:]
	}
	return x
}

// chunk returns the index of the chunk where k is or would go.
func (x *index) chunk(k string) int {
	i, _ := slices.BinarySearchFunc(x.chunks, k, func(c []string, k string) int {
		return strings.Compare(c[len(c)-1], k)
	})
	return min(i, len(x.chunks)-1)
}

// insert adds k (a key not yet present; present keys are left alone).
func (x *index) insert(k string) {
	if len(x.chunks) == 0 {
		x.chunks = [][]string{{k}}
		return
	}
	ci := x.chunk(k)
	c := x.chunks[ci]
	j, found := slices.BinarySearch(c, k)
	if found {
		return
	}
	c = slices.Insert(c, j, k)
	if len(c) <= chunkMax {
		x.chunks[ci] = c
		return
	}
	half := len(c) / 2
	lo, hi := slices.Clone(c[:half]), slices.Clone(c[half:])
	x.chunks = slices.Insert(x.chunks, ci+1, hi)
	x.chunks[ci] = lo
}

// remove deletes k if present.
func (x *index) remove(k string) {
	if len(x.chunks) == 0 {
		return
	}
	ci := x.chunk(k)
	c := x.chunks[ci]
	j, found := slices.BinarySearch(c, k)
	if !found {
		return
	}
	c = slices.Delete(c, j, j+1)
	if len(c) == 0 {
		x.chunks = slices.Delete(x.chunks, ci, ci+1)
		return
	}
	x.chunks[ci] = c
}

// ascend calls fn with every key ≥ from in order until fn returns false.
func (x *index) ascend(from string, fn func(k string) bool) {
	if x == nil || len(x.chunks) == 0 {
		return
	}
	ci := x.chunk(from)
	j, _ := slices.BinarySearch(x.chunks[ci], from)
	for ; ci < len(x.chunks); ci, j = ci+1, 0 {
		for _, k := range x.chunks[ci][j:] {
			if !fn(k) {
				return
			}
		}
	}
}

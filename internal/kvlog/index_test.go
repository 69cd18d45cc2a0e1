package kvlog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestIndexMatchesSortedKeys checks the ordered index against a sorted
// copy of a map through random inserts, deletes and seeks that split and
// empty chunks.
func TestIndexMatchesSortedKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := map[string]bool{}
	var init []string
	for i := range 700 {
		k := fmt.Sprintf("k%05d", i*3)
		keys[k] = true
		init = append(init, k)
	}
	x := newIndex(init)
	for step := range 20000 {
		k := fmt.Sprintf("k%05d", r.IntN(4000))
		if r.IntN(3) == 0 {
			delete(keys, k)
			x.remove(k)
		} else {
			keys[k] = true
			x.insert(k)
		}
		if step%997 != 0 {
			continue
		}
		want := slices.Sorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		})
		from := fmt.Sprintf("k%05d", r.IntN(4100))
		var got []string
		x.ascend(from, func(k string) bool { got = append(got, k); return true })
		i, _ := slices.BinarySearch(want, from)
		if !slices.Equal(got, want[i:]) {
			t.Fatalf("step %d: ascend(%q) = %d keys, want %d", step, from, len(got), len(want[i:]))
		}
		for _, c := range x.chunks {
			if len(c) == 0 || len(c) > chunkMax {
				t.Fatalf("step %d: chunk of %d keys", step, len(c))
			}
		}
	}
}

//go:build unix

package kvlog

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestKeysetMatchesAMap checks a bucket's keyset against a map and a
// sorted copy of its keys through random puts, overwrites, deletes and
// seeks that split and empty chunks, reuse entries and repack the key
// blocks; once with the full key hash and once with hashes narrowed to
// 16 values, so that most keys share a hash chain. Key strings handed out
// before a repack must keep their bytes.
func TestKeysetMatchesAMap(t *testing.T) {
	for _, mask := range []uint64{^uint64(0), 0xF} {
		t.Run(fmt.Sprintf("mask=%x", mask), func(t *testing.T) {
			defer func(m uint64) { hashMask = m }(hashMask)
			hashMask = mask
			r := rand.New(rand.NewPCG(1, 2))
			want := map[string]loc{}
			var init []string
			for i := range 700 {
				k := fmt.Sprintf("k%05d", i*3)
				want[k] = loc(i)
				init = append(init, k)
			}
			locs := make([]loc, len(init))
			for i, k := range init {
				locs[i] = want[k]
			}
			s := newKeysetSorted(init, locs)
			var held [][2]string // keys handed out, kept across repacks, and copies
			long := strings.Repeat("L", keyBlock/8)
			for step := range 30000 {
				k := fmt.Sprintf("k%05d%s", r.IntN(4000), strings.Repeat("x", r.IntN(40)))
				if r.IntN(50) == 0 {
					k += long // a key with a block of its own
				}
				if r.IntN(2) == 0 {
					_, had := want[k]
					old, got := s.del(k)
					if got != had || had && old != want[k] {
						t.Fatalf("step %d: del(%q) = %v, %v; want %v, %v", step, k, old, got, want[k], had)
					}
					delete(want, k)
				} else {
					l := loc(step)
					prev, had := want[k]
					old, got := s.put(k, l)
					if got != had || had && old != prev {
						t.Fatalf("step %d: put(%q) = %v, %v; want %v, %v", step, k, old, got, prev, had)
					}
					want[k] = l
				}
				if s.len() != len(want) {
					t.Fatalf("step %d: %d keys, want %d", step, s.len(), len(want))
				}
				if step%997 != 0 {
					continue
				}
				for k, l := range want {
					if got, ok := s.get(k); !ok || got != l {
						t.Fatalf("step %d: get(%q) = %v, %v; want %v", step, k, got, ok, l)
					}
				}
				if _, ok := s.get("absent"); ok {
					t.Fatalf("step %d: found a key never put", step)
				}
				sorted := slices.Sorted(maps.Keys(want))
				from := fmt.Sprintf("k%05d", r.IntN(4100))
				var got []string
				s.ascend(from, func(k string, l loc) bool {
					if want[k] != l {
						t.Fatalf("step %d: ascend gives %q at %v, want %v", step, k, l, want[k])
					}
					got = append(got, k)
					return true
				})
				i, _ := slices.BinarySearch(sorted, from)
				if !slices.Equal(got, sorted[i:]) {
					t.Fatalf("step %d: ascend(%q) = %d keys, want %d", step, from, len(got), len(sorted[i:]))
				}
				n := 0
				s.all(func(k string, l loc) {
					if n++; want[k] != l {
						t.Fatalf("step %d: all gives %q at %v, want %v", step, k, l, want[k])
					}
				})
				if n != len(want) {
					t.Fatalf("step %d: all gives %d keys, want %d", step, n, len(want))
				}
				for _, c := range s.chunks {
					if len(c) == 0 || len(c) > chunkMax {
						t.Fatalf("step %d: chunk of %d keys", step, len(c))
					}
				}
				for j, h := range held {
					if h[0] != h[1] {
						t.Fatalf("step %d: key %d handed out as %q now reads %q", step, j, h[1], h[0])
					}
				}
				for _, k := range got[:min(len(got), 5)] {
					held = append(held, [2]string{k, strings.Clone(k)})
				}
			}
		})
	}
}

// TestWatchAndForEachFromAcrossReopen checks that a watch is seeded with
// the keys present and then sees each durable change once (a failed
// function's writes never), and that the ordered walk from a key is right
// both on the replayed index and on the one kept by writes.
func TestWatchAndForEachFromAcrossReopen(t *testing.T) {
	path := t.TempDir() + "/db"
	db := open(t, path, Options{})
	for _, k := range []string{"c", "a", "e"} {
		put(t, db, "b", k, k+k)
	}
	put(t, db, "other", "z", "1")
	db.Close()
	db = open(t, path, Options{})

	total := 0
	db.Watch("b", func(_ string, old, new []byte) { total += len(new) - len(old) })
	if total != 6 {
		t.Fatalf("seeded total %d, want 6", total)
	}
	put(t, db, "b", "d", "dddd")
	put(t, db, "b", "a", "a") // 2 → 1 byte
	if err := db.Update(func(tx *Tx) error { tx.Delete("b", "e"); tx.Put("b", "q", []byte("qq")); return errors.New("no") }); err == nil {
		t.Fatal("failed function committed")
	}
	if err := db.Update(func(tx *Tx) error { tx.Delete("b", "c"); tx.Delete("b", "missing"); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := 1 + 2 + 4; total != want { // a, e, d
		t.Fatalf("total %d after changes, want %d", total, want)
	}
	walk := func(from string) string {
		var keys []string
		db.View(func(r Reader) error {
			return r.ForEachFrom("b", from, func(k string, _ []byte) error { keys = append(keys, k); return nil })
		})
		return fmt.Sprint(keys)
	}
	for from, want := range map[string]string{"": "[a d e]", "b": "[d e]", "d": "[d e]", "d\x00": "[e]", "f": "[]"} {
		if got := walk(from); got != want {
			t.Errorf("ForEachFrom(%q) = %s, want %s", from, got, want)
		}
	}
}

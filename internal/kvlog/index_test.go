package kvlog

import (
	"errors"
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

//go:build unix

package kvlog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scatterKey is key i of n in an order unrelated to i, as a driver's
// random volume IDs are.
func scatterKey(i int) string { return fmt.Sprintf("%016x", uint64(i+1)*0x9E3779B97F4A7C15) }

// outOfOrder counts the keys of bucket b whose value lies before that of
// the key ahead of them, walking in key order: the places where a walk's
// read of one stretch of the file ends. A value out of place makes two.
func outOfOrder(db *DB, b string) int {
	n, last := 0, int64(0)
	db.buckets[b].ascend("", func(k string, l loc) bool {
		off := l.off()
		if off < last {
			n++
		}
		last = off
		return true
	})
	return n
}

// TestScatteredStoreCompactsInKeyOrder writes keys in random order, a
// record each, as a driver's creates do: once there are SortAt of them
// the store keeps at most a quarter of the values out of key order by
// compacting, and the counts it keeps for that agree with the file
// through overwrites, deletes and a reopen.
func TestScatteredStoreCompactsInKeyOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	o := Options{SortAt: 200}
	db := open(t, path, o)
	want := map[string]string{}
	for i := 0; i < 1500; i++ {
		before := db.keys // the check before a write sees the keys so far
		k := scatterKey(i)
		v := fmt.Sprintf("%s-%s", k, strings.Repeat("v", i%300))
		if err := db.Update(func(tx *Tx) error {
			tx.Put("vol", k, []byte(v))
			if i%7 == 0 { // an overwrite and a delete now and then
				tx.Put("vol", scatterKey(i/2), []byte("again"))
				tx.Delete("vol", scatterKey(i/3+1))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want["vol/"+k] = v
		if i%7 == 0 {
			want["vol/"+scatterKey(i/2)] = "again"
			delete(want, "vol/"+scatterKey(i/3+1))
		}
		db.settle()
		if before >= o.SortAt && db.misplaced > db.keys/4+3 {
			t.Fatalf("after %d writes %d of %d values are out of key order, want at most a quarter", i+1, db.misplaced, db.keys)
		}
	}
	if db.snapshot == 0 {
		t.Fatal("no compaction ran")
	}
	if n := outOfOrder(db, "vol"); n > 2*db.misplaced {
		t.Errorf("a walk in key order goes back %d times, more than twice the %d values written since the last compaction", n, db.misplaced)
	}
	if err := db.Verify(); err != nil { // checks the counts too
		t.Fatal(err)
	}
	if got := snapshot(db); !equal(got, want) {
		t.Fatalf("%d keys, want %d", len(got), len(want))
	}
	keys, misplaced := db.keys, db.misplaced
	db.Close()
	db = open(t, path, o)
	if db.keys != keys || db.misplaced != misplaced {
		t.Errorf("reopened: %d keys, %d out of order; before: %d, %d", db.keys, db.misplaced, keys, misplaced)
	}
	if got := snapshot(db); !equal(got, want) {
		t.Fatalf("reopened: %d keys, want %d", len(got), len(want))
	}
}

// TestNeverCompactedFileSortsOnFirstWrite: a file whose values were all
// appended (by a store that never compacted it, or an older csikit)
// counts every value out of order at open, and its first write compacts.
func TestNeverCompactedFileSortsOnFirstWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db := open(t, path, Options{SortAt: 1 << 30})
	for i := 0; i < 300; i++ {
		put(t, db, "vol", scatterKey(i), strings.Repeat("v", 200))
	}
	if db.snapshot != 0 {
		t.Fatal("compacted before the test meant it to")
	}
	db.Close()
	db = open(t, path, Options{SortAt: 100})
	if db.keys != 300 || db.misplaced != 300 {
		t.Fatalf("at open: %d keys, %d out of order, want 300 and 300", db.keys, db.misplaced)
	}
	put(t, db, "other", "k", "v")
	db.settle()
	if db.snapshot == 0 || db.misplaced != 1 || outOfOrder(db, "vol") != 0 {
		t.Fatalf("after the first write: %d snapshot records, %d values out of order, %d back steps; want a compaction, 1 and 0",
			db.snapshot, db.misplaced, outOfOrder(db, "vol"))
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestSortedFileDamagedAtOpen damages a file a scatter compaction wrote
// and then appended to: cut or corrupted inside the compacted records it
// is refused; torn in the appended tail it opens to the acknowledged
// state before the tear, its counts recomputed.
func TestSortedFileDamagedAtOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	o := Options{SortAt: 100}
	db := open(t, path, o)
	for i := 0; i < 400; i++ {
		put(t, db, "vol", scatterKey(i), strings.Repeat("v", 6000)) // several MB: several snapshot records
	}
	db.settle()
	if db.snapshot < 2 {
		t.Fatalf("%d snapshot records, want several", db.snapshot)
	}
	snapEnd, misplaced := db.sorted, db.misplaced
	put(t, db, "vol", "tail-1", "t1")
	put(t, db, "vol", "tail-2", "t2")
	db.Close()
	clean, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The record holding "tail-2": the last one.
	last := bytes.LastIndex(clean, []byte("tail-2"))
	lastRec := last / sector * sector
	cases := []struct {
		name    string
		damage  func(b []byte) []byte
		refused bool
	}{
		{"cut inside the snapshot", func(b []byte) []byte { return b[:snapEnd/2/sector*sector] }, true},
		{"a byte flipped inside the snapshot", func(b []byte) []byte { b[headerSize+recHeader+100] ^= 0x55; return b }, true},
		{"truncated mid-record in the tail", func(b []byte) []byte { return b[:last] }, false},
		{"the last record zeroed", func(b []byte) []byte { clear(b[lastRec:]); return b }, false},
		{"the header's snapshot count garbled", func(b []byte) []byte { b[32] ^= 0x01; return b }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			if err := os.WriteFile(p, c.damage(bytes.Clone(clean)), 0o600); err != nil {
				t.Fatal(err)
			}
			db, err := Open(p, o)
			if c.refused {
				if err == nil {
					db.Close()
					t.Fatal("opened, want refused as corrupt")
				}
				if !strings.Contains(err.Error(), "corrupt") {
					t.Fatalf("Open: %v, want a corruption error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if db.keys != 401 || db.misplaced != misplaced+1 {
				t.Errorf("%d keys, %d out of order; want 401 and %d (tail-1 too)", db.keys, db.misplaced, misplaced+1)
			}
			if get(db, "vol", "tail-1") == nil || get(db, "vol", "tail-2") != nil {
				t.Error("want tail-1 and not tail-2")
			}
			if err := db.Verify(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestScatteredBucketCompacts: one bucket's values rewritten (a driver
// updating every volume record) while a larger bucket beside it stays in
// place. The store's count stays under a quarter, but the rewritten
// bucket's walks would read every value on its own; its own count must
// trigger the sorting compaction.
func TestScatteredBucketCompacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	o := Options{SortAt: 100}
	db := open(t, path, o)
	if err := db.Update(func(tx *Tx) error {
		for i := 0; i < 1000; i++ {
			tx.Put("names", scatterKey(i), []byte(strings.Repeat("n", 40)))
		}
		for i := 0; i < 300; i++ {
			tx.Put("vol", scatterKey(i), []byte(strings.Repeat("v", 100)))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	put(t, db, "other", "k", "v") // the first write after: sorts the file
	db.settle()
	if db.snapshot == 0 || db.misplaced > 1 {
		t.Fatalf("the set-up did not sort the file: %d snapshot records, %d values out of order", db.snapshot, db.misplaced)
	}
	for i := 0; i < 300; i++ {
		put(t, db, "vol", scatterKey((i*7)%300), strings.Repeat("w", 100))
		db.settle()
		if ks := db.buckets["vol"]; ks.misplaced > ks.len()/4+3 {
			t.Fatalf("after %d rewrites %d of the bucket's %d values are out of key order (the store's: %d of %d), want at most a quarter",
				i+1, ks.misplaced, ks.len(), db.misplaced, db.keys)
		}
	}
	if ks := db.buckets["vol"]; outOfOrder(db, "vol") > 2*ks.misplaced {
		t.Errorf("a walk of the bucket goes back %d times, more than twice its %d values written since the last compaction", outOfOrder(db, "vol"), ks.misplaced)
	}
	if err := db.Verify(); err != nil { // each bucket's count too
		t.Fatal(err)
	}
	counts := map[string]int{}
	for b, ks := range db.buckets {
		counts[b] = ks.misplaced
	}
	db.Close()
	db = open(t, path, o)
	for b, ks := range db.buckets {
		if ks.misplaced != counts[b] {
			t.Errorf("reopened: bucket %s has %d values out of order, %d before", b, ks.misplaced, counts[b])
		}
	}
}

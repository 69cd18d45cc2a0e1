//go:build unix

package kvlog

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestValuesReadAfterCompactionInPlace checks that, without a reopen,
// every value is read from where a compaction moved it: the keys in
// memory follow the file they point into.
func TestValuesReadAfterCompactionInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db := open(t, path, Options{Grow: 16 << 10, CompactAt: 64 << 10})
	var total int64
	db.Watch("c", func(_ string, old, new []byte) { total += int64(len(new) - len(old)) })
	want := map[string]string{}
	for i := 0; i < 3000; i++ {
		k := fmt.Sprint(i % 53)
		v := strings.Repeat(fmt.Sprint(i), 1+i%17)
		put(t, db, "c", k, v)
		want["c/"+k] = v
		if i%7 == 0 {
			if err := db.Update(func(tx *Tx) error { tx.Delete("c", k); return nil }); err != nil {
				t.Fatal(err)
			}
			delete(want, "c/"+k)
		}
	}
	if db.snapshot == 0 {
		t.Fatalf("no compaction happened (snapshot %d)", db.snapshot)
	}
	if got := snapshot(db); !equal(got, want) {
		t.Fatalf("after compactions: %v, want %v", got, want)
	}
	var sum int64
	for _, v := range want {
		sum += int64(len(v))
	}
	if total != sum {
		t.Fatalf("watch total %d, values total %d", total, sum)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	// Scan visits the same keys and values as ForEach.
	got := map[string]string{}
	db.View(func(r Reader) error {
		return r.Scan("c", func(k string, v []byte) error { got["c/"+k] = string(v); return nil })
	})
	if !equal(got, want) {
		t.Fatalf("Scan: %v, want %v", got, want)
	}
}

// TestUnreadableValueFailsReadsAndUpdates checks that a value the file no
// longer gives back fails the View or Update that asked for it, and that
// such an Update writes nothing: a missing value must never read as an
// absent key.
func TestUnreadableValueFailsReadsAndUpdates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db := open(t, path, Options{})
	put(t, db, "a", "k", "1")
	good := db.f
	bad, err := os.Open(os.DevNull) // reads give nothing
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bad.Close() })
	db.mu.Lock()
	db.f = bad
	db.mu.Unlock()
	if err := db.View(func(r Reader) error { r.Get("a", "k"); return nil }); err == nil {
		t.Fatal("View of an unreadable value succeeded")
	}
	err = db.Update(func(tx *Tx) error {
		if tx.Get("a", "k") == nil {
			tx.Put("a", "k", []byte("absent?"))
		}
		return nil
	})
	if err == nil {
		t.Fatal("Update that read an unreadable value succeeded")
	}
	if err := db.Watch("a", func(string, []byte, []byte) {}); err == nil {
		t.Fatal("Watch over unreadable values succeeded")
	}
	db.mu.Lock()
	db.f = good
	db.mu.Unlock()
	if got := string(get(db, "a", "k")); got != "1" {
		t.Fatalf("after the failed update: %q, want 1", got)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkOpen opens a store of 300,000 keys of 150-byte values (what
// 100,000 hostpath volumes hold) and reports the heap it keeps per key
// and what a full garbage collection costs with the store open (the
// fastest of three): the mark work the keys add to every GC cycle, which
// a page of a listing waits behind.
func BenchmarkOpen(b *testing.B) {
	path := filepath.Join(b.TempDir(), "db")
	db, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	v := []byte(strings.Repeat("v", 150))
	for i := 0; i < 300_000; i += 1000 {
		if err := db.Update(func(tx *Tx) error {
			for j := i; j < i+1000; j++ {
				tx.Put("b", fmt.Sprintf("%032x", j*7919), v)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	db.Close()
	b.ResetTimer()
	var ms0, ms1 runtime.MemStats
	var gc time.Duration
	for range b.N {
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		db, err = Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms1)
		b.StopTimer()
		gc = time.Hour
		for range 3 {
			t := time.Now()
			runtime.GC()
			gc = min(gc, time.Since(t))
		}
		b.StartTimer()
		db.Close()
	}
	b.ReportMetric(float64(ms1.HeapAlloc-ms0.HeapAlloc)/300_000, "heap-B/key")
	b.ReportMetric(float64(gc.Microseconds()), "gc-µs")
}

// TestWatchSeedLetsReadersInHoldsCommits checks a Watch's seeding: Views
// run alongside it (a driver's start reads while its ledger seeds), and
// no commit runs until the watch is registered, so the watch sees every
// change after its seed exactly once.
func TestWatchSeedLetsReadersInHoldsCommits(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "db"), Options{})
	put(t, db, "w", "a", "1")
	inSeed, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var seen []string
	go func() {
		defer close(done)
		db.Watch("w", func(k string, _, new []byte) {
			seen = append(seen, k+"="+string(new))
			if len(seen) == 1 {
				close(inSeed)
				<-release
			}
		})
	}()
	<-inSeed
	if got := string(get(db, "w", "a")); got != "1" {
		t.Fatalf("a read during the seeding: %q", got)
	}
	committed := make(chan error, 1)
	go func() {
		committed <- db.Update(func(tx *Tx) error { tx.Put("w", "b", []byte("2")); return nil })
	}()
	select {
	case err := <-committed:
		t.Fatalf("a commit ran during a watch's seeding (%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-done
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if want := []string{"a=1", "b=2"}; !slices.Equal(seen, want) {
		t.Fatalf("the watch saw %v, want %v", seen, want)
	}
}

//go:build unix

package kvlog

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPagesDuringCompactions pages through a bucket with ForEachFrom, Get
// and Scan from several readers while writers overwrite, add and delete
// keys often enough that the file is compacted again and again: every
// page must come back without error, in key order, with each key's own
// value (never one from a file being replaced or a closed one), and the
// keys that are never deleted always there. Run it with -race: a
// compaction that swapped or closed the file under a reader would show
// here as a read error, a wrong value or a data race.
func TestPagesDuringCompactions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db := open(t, path, Options{Grow: 64 << 10, CompactAt: 64 << 10, SortAt: 64})
	const fixed = 300 // keys that are only ever overwritten
	key := func(i int) string { return fmt.Sprintf("%016x", uint64(i+1)*0x9E3779B97F4A7C15) }
	value := func(k string, gen int) []byte {
		return []byte(k + "/" + fmt.Sprint(gen) + "/" + strings.Repeat("v", 200+gen%300))
	}
	if err := db.Update(func(tx *Tx) error {
		for i := range fixed {
			tx.Put("b", key(i), value(key(i), 0))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg, writers sync.WaitGroup
	errStop := errors.New("page full")
	check := func(k string, v []byte) error {
		if !strings.HasPrefix(string(v), k+"/") {
			return fmt.Errorf("key %s has value %.40q…, another key's or garbage", k, v)
		}
		return nil
	}
	var pages atomic.Int64
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(r), 7))
			for !stop.Load() {
				from := key(rnd.IntN(fixed))
				var prev string
				n := 0
				err := db.View(func(rd Reader) error {
					switch rnd.IntN(4) {
					case 0:
						k := key(rnd.IntN(fixed))
						if v := rd.Get("b", k); v == nil {
							return fmt.Errorf("fixed key %s missing", k)
						} else {
							return check(k, v)
						}
					case 1:
						seen := 0
						err := rd.Scan("b", func(k string, v []byte) error { seen++; return check(k, v) })
						if err == nil && seen < fixed {
							err = fmt.Errorf("a scan saw %d keys, at least %d are never deleted", seen, fixed)
						}
						return err
					}
					return rd.ForEachFrom("b", from, func(k string, v []byte) error {
						if k < from || k <= prev && n > 0 {
							return fmt.Errorf("page from %s: %s after %s", from, k, prev)
						}
						prev, n = k, n+1
						if err := check(k, v); err != nil {
							return err
						}
						if n == 50 {
							return errStop
						}
						return nil
					})
				})
				if err != nil && err != errStop {
					t.Error(err)
					stop.Store(true)
					return
				}
				pages.Add(1)
			}
		}()
	}
	compactions0, carried0 := db.compactions.Load(), db.carried.Load()
	for w := range 2 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 9))
			for gen := 1; gen <= 300 && !stop.Load(); gen++ {
				err := db.Update(func(tx *Tx) error {
					k := key(rnd.IntN(fixed))
					tx.Put("b", k, value(k, gen))
					extra := key(fixed + w*1000 + rnd.IntN(200))
					if rnd.IntN(2) == 0 {
						tx.Put("b", extra, value(extra, gen))
					} else {
						tx.Delete("b", extra)
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					stop.Store(true)
				}
			}
		}()
	}
	writers.Wait()
	stop.Store(true)
	wg.Wait()
	n, carried := db.compactions.Load()-compactions0, db.carried.Load()-carried0
	t.Logf("%d pages and reads alongside %d compactions, which carried %d records committed during their copies", pages.Load(), n, carried)
	if n < 5 || carried == 0 {
		t.Errorf("%d compactions carrying %d records, want at least 5 and 1: the test no longer tests them", n, carried)
	}
	db.settle()
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	db.View(func(r Reader) error {
		return r.ForEach("b", func(k string, v []byte) error { want[k] = string(v); return nil })
	})
	db.Close()
	db = open(t, path, Options{})
	got := map[string]string{}
	db.View(func(r Reader) error {
		return r.ForEach("b", func(k string, v []byte) error { got[k] = string(v); return nil })
	})
	if !maps.Equal(got, want) {
		t.Fatalf("reopened: %d keys, want %d (or values differ)", len(got), len(want))
	}
}

// BenchmarkUpdateDuringCompactions: 8 writers each make 600 Updates (a new
// key and an overwrite, 400-byte values) on a store of 20,000 keys, enough
// values out of key order for at least one compaction; it reports the
// slowest Update, the p99 and the p50, and the compactions that ran:
// what a commit waits for when a compaction comes due.
func BenchmarkUpdateDuringCompactions(b *testing.B) {
	db, keys := pageStore(b, 20000)
	v := []byte(strings.Repeat("w", 400))
	var all []time.Duration
	c0 := db.compactions.Load()
	for n := range b.N {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lat := make([]time.Duration, 0, 600)
				for i := range 600 {
					t := time.Now()
					err := db.Update(func(tx *Tx) error {
						tx.Put("vol", fmt.Sprintf("new-%d-%d-%d", n, w, i), v)
						tx.Put("vol", keys[(w*600+i*7)%len(keys)], v)
						return nil
					})
					if err != nil {
						b.Error(err)
						return
					}
					lat = append(lat, time.Since(t))
				}
				mu.Lock()
				all = append(all, lat...)
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	db.settle()
	slices.Sort(all)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(all[len(all)-1]), "max-ms")
	b.ReportMetric(ms(all[len(all)*99/100]), "p99-ms")
	b.ReportMetric(ms(all[len(all)/2]), "p50-ms")
	b.ReportMetric(float64(db.compactions.Load()-c0), "compactions")
}

// TestCloseDuringACompaction closes the store while a compaction copies in
// the background: Close drops it (its file removed, the old log still the
// store) and a reopen finds every acknowledged write.
func TestCloseDuringACompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, Options{CompactAt: 64 << 10, SortAt: 64})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	v := strings.Repeat("v", 1000)
	caught := false
	for i := 0; i < 20000 && !caught; i++ {
		k := fmt.Sprintf("%016x", uint64(i+1)*0x9E3779B97F4A7C15)
		if err := db.Update(func(tx *Tx) error { tx.Put("b", k, []byte(v)); return nil }); err != nil {
			t.Fatal(err)
		}
		want[k] = v
		db.gmu.Lock()
		caught = db.running != nil && !db.running.ready
		db.gmu.Unlock()
	}
	if !caught {
		t.Fatal("no compaction was copying after a write: the test did not test it")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("the dropped compaction left its file: %v", err)
	}
	db = open(t, path, Options{})
	got := map[string]string{}
	db.View(func(r Reader) error {
		return r.ForEach("b", func(k string, v []byte) error { got[k] = string(v); return nil })
	})
	if !maps.Equal(got, want) {
		t.Fatalf("reopened: %d keys, want %d (or values differ)", len(got), len(want))
	}
}

package kvlog

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWritesDuringABackgroundCompaction holds a compaction between its
// copy and its finish while writers put, overwrite and delete keys (those
// in its snapshot and new ones) and readers read: every write is
// acknowledged without waiting for the compaction, and once it finishes
// memory, the file (Verify) and a reopen all hold exactly the acknowledged
// writes, from the new file.
func TestWritesDuringABackgroundCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	o := Options{Grow: 16 << 10, CompactAt: 64 << 10}
	db := open(t, path, o)
	want := map[string]string{}
	var mu sync.Mutex
	set := func(k, v string) {
		mu.Lock()
		defer mu.Unlock()
		if v == "" {
			delete(want, "b/"+k)
		} else {
			want["b/"+k] = v
		}
	}
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	afterCompactionWrite = func() {
		once.Do(func() { close(held); <-release })
	}
	defer func() { afterCompactionWrite = nil }()
	// Overwrites of 50 keys until a compaction starts and is held.
	for i := 0; ; i++ {
		k, v := fmt.Sprint(i%50), strings.Repeat(fmt.Sprint(i), 30)
		put(t, db, "b", k, v)
		set(k, v)
		select {
		case <-held:
		default:
			if i > 20000 {
				t.Fatal("no compaction started")
			}
			continue
		}
		break
	}
	seqBefore := db.Records()
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				k := fmt.Sprint((i*4 + w) % 80) // its own keys: in the snapshot and new
				v := fmt.Sprintf("w%d-%d", w, i)
				err := db.Update(func(tx *Tx) error {
					if i%9 == 0 {
						tx.Delete("b", k)
					} else {
						tx.Put("b", k, []byte(v))
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
				if i%9 == 0 {
					set(k, "")
				} else {
					set(k, v)
				}
				_ = db.View(func(r Reader) error { r.Get("b", k); return nil })
			}
		}()
	}
	wg.Wait()
	if db.Records() <= seqBefore {
		t.Fatal("no write was committed while the compaction was held")
	}
	snapBefore := db.snapshot
	close(release)
	db.waitCompaction()
	if db.snapshot == snapBefore {
		t.Fatal("the held compaction did not finish")
	}
	if got := snapshot(db); !equal(got, want) {
		t.Fatalf("after the compaction: %d keys, want %d (or values differ)", len(got), len(want))
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, path, o)
	if got := snapshot(db); !equal(got, want) {
		t.Fatalf("after reopen: %d keys, want %d (or values differ)", len(got), len(want))
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkUpdateDuringCompactions times Updates of 8 writers on a store
// of 100,000 keys of 300 bytes whose new keys, scattered among the old,
// make it compact every few tens of thousands of writes: the slowest
// Update is the one a compaction holds back. Reports max-ms (the slowest)
// and p99-ms per Update.
func BenchmarkUpdateDuringCompactions(b *testing.B) {
	path := filepath.Join(b.TempDir(), "db")
	db := open(b, path, Options{})
	val := []byte(strings.Repeat("v", 300))
	const n = 100000
	for i := 0; i < n; i += 1000 {
		if err := db.Update(func(tx *Tx) error {
			for j := i; j < i+1000; j++ {
				tx.Put("vol", fmt.Sprintf("%08x", uint32(j)*2654435761), val)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	var mu sync.Mutex
	var lat []time.Duration
	var seq atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			k := fmt.Sprintf("%08x-new", uint32(seq.Add(1))*2654435761)
			t0 := time.Now()
			if err := db.Update(func(tx *Tx) error { tx.Put("vol", k, val); return nil }); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

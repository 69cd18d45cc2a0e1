//go:build unix

package kvlog

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pageStore fills a store with n keys of 400-byte values (a hostpath
// volume's record is about that), written in batches of 1000 in an order
// unrelated to the keys', as volumes with random IDs are created.
func pageStore(b testing.TB, n int) (*DB, []string) {
	db := open(b, filepath.Join(b.TempDir(), "db"), Options{})
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%016x", uint64(i+1)*0x9E3779B97F4A7C15)
	}
	v := []byte(strings.Repeat("v", 400))
	for i := 0; i < n; i += 1000 {
		if err := db.Update(func(tx *Tx) error {
			for _, k := range keys[i:min(i+1000, n)] {
				tx.Put("vol", k, v)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	return db, keys
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkForEachFromPage walks pages of 501 keys (a ListVolumes page of
// 500 and the one that tells there is a next) from offsets spread over
// 100,000 keys, in the log as written and after a compaction.
func BenchmarkForEachFromPage(b *testing.B) {
	const n, page = 100_000, 501
	db, keys := pageStore(b, n)
	run := func(b *testing.B) {
		stop := errors.New("stop")
		i := 0
		cpu0 := cpuTime()
		for b.Loop() {
			from := keys[(i*7919)%n]
			i++
			seen := 0
			err := db.View(func(r Reader) error {
				return r.ForEachFrom("vol", from, func(k string, v []byte) error {
					if seen++; seen == page {
						return stop
					}
					return nil
				})
			})
			if err != nil && err != stop {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	}
	b.Run("log", run)
	if _, err := db.compact(); err != nil { // no writer runs: the benchmark leads
		b.Fatal(err)
	}
	b.Run("compacted", run)
}

// TestForEachFromBatches checks walks that read values a batch at a time:
// values far apart and side by side, empty and larger than a batch's
// bound, overwritten and deleted, in the log and after a compaction (which
// writes them in key order), from every kind of start.
func TestForEachFromBatches(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "db"), Options{})
	want := map[string]string{}
	for round := 0; round < 3; round++ {
		if err := db.Update(func(tx *Tx) error {
			for i := 0; i < 700; i++ {
				k := fmt.Sprintf("k%04d", (i*37+round*11)%900)
				var v string
				switch {
				case i%97 == 0:
					v = strings.Repeat("L", batchBytes+i)
				case i%13 == 0:
					v = ""
				default:
					v = fmt.Sprintf("%s-%d-%s", k, round, strings.Repeat("x", i%300))
				}
				if i%29 == 0 && round > 0 {
					tx.Delete("b", k)
					delete(want, k)
					continue
				}
				tx.Put("b", k, []byte(v))
				want[k] = v
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		keys := slices.Sorted(maps.Keys(want))
		for _, from := range []string{"", "k", "k0450", "k04505", keys[len(keys)-1], "z"} {
			var got []string
			if err := db.View(func(r Reader) error {
				return r.ForEachFrom("b", from, func(k string, v []byte) error {
					if string(v) != want[k] {
						return fmt.Errorf("%s: %d bytes, want %d", k, len(v), len(want[k]))
					}
					got = append(got, k)
					return nil
				})
			}); err != nil {
				t.Fatalf("%s, from %q: %v", when, from, err)
			}
			i, _ := slices.BinarySearch(keys, from)
			if !slices.Equal(got, keys[i:]) {
				t.Fatalf("%s, from %q: walked %d keys, want %d", when, from, len(got), len(keys)-i)
			}
		}
	}
	check("in the log")
	if _, err := db.compact(); err != nil { // no writer runs: the test leads
		t.Fatal(err)
	}
	check("after a compaction")
	var last int64
	db.buckets["b"].ascend("", func(k string, l loc) bool {
		if off := l.off(); off < last {
			t.Errorf("after a compaction %s is at %d, before the key ahead of it (%d)", k, off, last)
		} else {
			last = off
		}
		return true
	})
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestPagesWhileCompactionsFinish compacts inline (as recovery does) right
// after bulk writes that leave a compaction copying in the background,
// then reads pages: neither may meet a file the other closed or replaced
// (the first background compaction failed exactly so, found only by
// BenchmarkForEachFromPage's one-shot run in CI).
func TestPagesWhileCompactionsFinish(t *testing.T) {
	const n, page = 100_000, 501
	db, keys := pageStore(t, n)
	stop := errors.New("stop")
	read := func() {
		for i := range 200 {
			from, seen := keys[(i*7919)%n], 0
			err := db.View(func(r Reader) error {
				return r.ForEachFrom("vol", from, func(k string, v []byte) error {
					if len(v) != 400 {
						return fmt.Errorf("key %s: %d bytes, want 400", k, len(v))
					}
					if seen++; seen == page {
						return stop
					}
					return nil
				})
			})
			if err != nil && err != stop {
				t.Fatalf("page %d: %v", i, err)
			}
		}
	}
	// An inline compaction (what recovery runs) while the bulk writes'
	// compaction may still be copying, then pages, then another.
	for range 2 {
		if _, err := db.compact(); err != nil {
			t.Fatal(err)
		}
		read()
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

package locks_test

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/csikit/csikit/locks"
)

const (
	mCreate = "/csi.v1.Controller/CreateVolume"
	mDelete = "/csi.v1.Controller/DeleteVolume"
)

func vol(id string) locks.Key { return locks.Key{Space: locks.SpaceVolume, ID: id} }

func TestTryLockExclusive(t *testing.T) {
	tab := locks.NewTable()
	if _, ok := tab.TryLock(vol("a"), locks.Exclusive, locks.Owner{Method: mCreate}); !ok {
		t.Fatal("first TryLock: got false, want true")
	}
	h, ok := tab.TryLock(vol("a"), locks.Exclusive, locks.Owner{Method: mDelete})
	if ok {
		t.Fatal("second TryLock of a held key: got true, want false")
	}
	if h.Method != mCreate || h.Shared != 0 || h.Held < 0 {
		t.Errorf("holder: got %+v, want Method %s, Shared 0", h, mCreate)
	}
	if _, ok := tab.TryLock(vol("a"), locks.Shared, locks.Owner{Method: mDelete}); ok {
		t.Error("Shared TryLock of an Exclusive key: got true, want false")
	}
	// Spaces are separate.
	other := locks.Key{Space: locks.SpaceVolumeName, ID: "a"}
	if _, ok := tab.TryLock(other, locks.Exclusive, locks.Owner{Method: mCreate}); !ok {
		t.Error("same ID in another space: got false, want true")
	}
	tab.Unlock(other, locks.Exclusive)
	tab.Unlock(vol("a"), locks.Exclusive)
	if _, ok := tab.TryLock(vol("a"), locks.Exclusive, locks.Owner{Method: mDelete}); !ok {
		t.Error("TryLock after Unlock: got false, want true")
	}
	tab.Unlock(vol("a"), locks.Exclusive)
	if st := tab.Stats(); st.Held != 0 || st.Oldest != 0 {
		t.Errorf("Stats after all released: got %+v, want zero", st)
	}
}

func TestTryLockShared(t *testing.T) {
	tab := locks.NewTable()
	k := locks.Key{Space: locks.SpaceSourceVolume, ID: "v"}
	for i := range 3 {
		if _, ok := tab.TryLock(k, locks.Shared, locks.Owner{Method: "/snap" + strconv.Itoa(i)}); !ok {
			t.Fatalf("Shared TryLock %d: got false, want true", i)
		}
	}
	h, ok := tab.TryLock(k, locks.Exclusive, locks.Owner{Method: mDelete})
	if ok || h.Shared != 3 || h.Method != "/snap0" {
		t.Fatalf("Exclusive over 3 Shared: got ok=%v holder %+v, want false, Shared 3, Method /snap0", ok, h)
	}
	// A mismatched Unlock is ignored.
	tab.Unlock(k, locks.Exclusive)
	if st := tab.Stats(); st.Held != 1 {
		t.Fatalf("after mismatched Unlock: got Held %d, want 1", st.Held)
	}
	for range 2 {
		tab.Unlock(k, locks.Shared)
	}
	if _, ok := tab.TryLock(k, locks.Exclusive, locks.Owner{Method: mDelete}); ok {
		t.Fatal("Exclusive with 1 Shared left: got true, want false")
	}
	tab.Unlock(k, locks.Shared)
	if _, ok := tab.TryLock(k, locks.Exclusive, locks.Owner{Method: mDelete}); !ok {
		t.Fatal("Exclusive after all Shared released: got false, want true")
	}
	if _, ok := tab.TryLock(k, locks.Shared, locks.Owner{Method: "/snap"}); ok {
		t.Fatal("Shared over Exclusive: got true, want false")
	}
	tab.Unlock(k, locks.Shared) // mismatched: ignored
	if st := tab.Stats(); st.Held != 1 {
		t.Fatalf("got Held %d, want 1", st.Held)
	}
	tab.Unlock(k, locks.Exclusive)
	tab.Unlock(k, locks.Exclusive) // double unlock: no-op
	if st := tab.Stats(); st.Held != 0 {
		t.Fatalf("got Held %d, want 0", st.Held)
	}
}

func TestStatsOldest(t *testing.T) {
	tab := locks.NewTable()
	tab.TryLock(vol("old"), locks.Exclusive, locks.Owner{Method: mCreate})
	time.Sleep(20 * time.Millisecond)
	tab.TryLock(vol("new"), locks.Exclusive, locks.Owner{Method: mCreate, Since: time.Now()})
	st := tab.Stats()
	if st.Held != 2 || st.Oldest < 20*time.Millisecond {
		t.Errorf("got %+v, want Held 2 and Oldest ≥ 20ms", st)
	}
	h, _ := tab.TryLock(vol("old"), locks.Exclusive, locks.Owner{Method: mDelete})
	if h.Held < 20*time.Millisecond {
		t.Errorf("holder age: got %v, want ≥ 20ms", h.Held)
	}
}

// TestConcurrentMutualExclusion runs hundreds of goroutines over hot and
// distinct keys and checks that no Exclusive key ever has two holders and
// that the table is empty at the end.
func TestConcurrentMutualExclusion(t *testing.T) {
	tab := locks.NewTable()
	const goroutines, rounds, hot = 300, 200, 4
	var inside [hot]atomic.Int32
	var wins, losses atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := vol("own-" + strconv.Itoa(g))
			for r := range rounds {
				// Distinct key: always succeeds.
				if h, ok := tab.TryLock(own, locks.Exclusive, locks.Owner{Method: mCreate}); !ok {
					t.Errorf("distinct key %v held by %+v", own, h)
					return
				}
				// Hot key: sometimes fails, never two inside.
				i := (g + r) % hot
				k := vol("hot-" + strconv.Itoa(i))
				if _, ok := tab.TryLock(k, locks.Exclusive, locks.Owner{Method: mDelete}); ok {
					if n := inside[i].Add(1); n != 1 {
						t.Errorf("hot key %d: got %d holders, want 1", i, n)
					}
					inside[i].Add(-1)
					tab.Unlock(k, locks.Exclusive)
					wins.Add(1)
				} else {
					losses.Add(1)
				}
				tab.Unlock(own, locks.Exclusive)
			}
		}()
	}
	wg.Wait()
	if st := tab.Stats(); st.Held != 0 {
		t.Errorf("after all goroutines: got Held %d, want 0", st.Held)
	}
	if wins.Load() == 0 {
		t.Error("hot keys: got 0 acquisitions, want some")
	}
	t.Logf("hot key acquisitions %d, conflicts %d", wins.Load(), losses.Load())
}

// TestTableShrinks checks that a burst of many keys does not stay in the
// table once released.
func TestTableShrinks(t *testing.T) {
	tab := locks.NewTable()
	for i := range 100_000 {
		tab.TryLock(vol(strconv.Itoa(i)), locks.Exclusive, locks.Owner{Method: mCreate})
	}
	if st := tab.Stats(); st.Held != 100_000 {
		t.Fatalf("got Held %d, want 100000", st.Held)
	}
	for i := range 100_000 {
		tab.Unlock(vol(strconv.Itoa(i)), locks.Exclusive)
	}
	if st := tab.Stats(); st.Held != 0 {
		t.Fatalf("got Held %d, want 0", st.Held)
	}
}

func TestLockAllocs(t *testing.T) {
	tab := locks.NewTable()
	k := vol("pvc-0123456789")
	o := locks.Owner{Method: mCreate, Since: time.Now()}
	allocs := testing.AllocsPerRun(1000, func() {
		tab.TryLock(k, locks.Exclusive, o)
		tab.Unlock(k, locks.Exclusive)
	})
	if allocs != 0 {
		t.Errorf("TryLock+Unlock: got %v allocs, want 0", allocs)
	}
}

// The lock benchmarks pass an Owner whose start time was read once, as the
// interceptor does once per RPC for all of its locks; ...WithClock reads
// the clock for every acquisition.

func BenchmarkLockUncontended(b *testing.B) {
	tab := locks.NewTable()
	k := vol("pvc-0123456789abcdef")
	o := locks.Owner{Method: mCreate, Since: time.Now()}
	b.ReportAllocs()
	for b.Loop() {
		tab.TryLock(k, locks.Exclusive, o)
		tab.Unlock(k, locks.Exclusive)
	}
}

func BenchmarkLockUncontendedWithClock(b *testing.B) {
	tab := locks.NewTable()
	k := vol("pvc-0123456789abcdef")
	b.ReportAllocs()
	for b.Loop() {
		tab.TryLock(k, locks.Exclusive, locks.Owner{Method: mCreate, Since: time.Now()})
		tab.Unlock(k, locks.Exclusive)
	}
}

func BenchmarkLockParallelDistinct(b *testing.B) {
	tab := locks.NewTable()
	var n atomic.Int64
	o := locks.Owner{Method: mCreate, Since: time.Now()}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		k := vol(fmt.Sprintf("pvc-%016d", n.Add(1)))
		for pb.Next() {
			tab.TryLock(k, locks.Exclusive, o)
			tab.Unlock(k, locks.Exclusive)
		}
	})
}

func BenchmarkLockParallelHot(b *testing.B) {
	tab := locks.NewTable()
	k := vol("pvc-hot")
	o := locks.Owner{Method: mCreate, Since: time.Now()}
	var conflicts atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := tab.TryLock(k, locks.Exclusive, o); ok {
				tab.Unlock(k, locks.Exclusive)
			} else {
				conflicts.Add(1)
			}
		}
	})
	b.ReportMetric(float64(conflicts.Load())/float64(b.N), "conflicts/op")
}

// BenchmarkBaselineMapMutex is the reference the lock table is measured
// against: one global mutex around a map, acquire and release.
func BenchmarkBaselineMapMutex(b *testing.B) {
	var mu sync.Mutex
	m := map[locks.Key]string{}
	k := vol("pvc-0123456789abcdef")
	for b.Loop() {
		mu.Lock()
		if _, held := m[k]; !held {
			m[k] = mCreate
		}
		mu.Unlock()
		mu.Lock()
		delete(m, k)
		mu.Unlock()
	}
}

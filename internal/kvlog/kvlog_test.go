//go:build unix

package kvlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func open(t testing.TB, path string, o Options) *DB {
	t.Helper()
	db, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// settle waits for a compaction copying in the background to finish (or
// fail): for tests that check what a compaction leaves.
func (db *DB) settle() {
	db.gmu.Lock()
	c := db.running
	db.gmu.Unlock()
	if c != nil {
		<-c.exited
	}
}

func get(db *DB, b, k string) (v []byte) {
	db.View(func(r Reader) error { v = r.Get(b, k); return nil })
	return v
}

func put(t testing.TB, db *DB, b, k, v string) {
	t.Helper()
	if err := db.Update(func(tx *Tx) error { tx.Put(b, k, []byte(v)); return nil }); err != nil {
		t.Fatal(err)
	}
}

func snapshot(db *DB) map[string]string {
	out := map[string]string{}
	db.View(func(r Reader) error {
		for _, b := range r.Buckets() {
			r.ForEach(b, func(k string, v []byte) error { out[b+"/"+k] = string(v); return nil })
		}
		return nil
	})
	return out
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestPutGetDeleteReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, db, "a", "x", "1")
	put(t, db, "a", "y", "2")
	put(t, db, "b", "x", "3")
	if err := db.Update(func(tx *Tx) error {
		if got := string(tx.Get("a", "x")); got != "1" {
			return fmt.Errorf("tx sees %q", got)
		}
		tx.Delete("a", "x")
		if tx.Get("a", "x") != nil {
			return errors.New("tx sees its own delete's key")
		}
		tx.Put("a", "z", nil)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a/y": "2", "a/z": "", "b/x": "3"}
	if got := snapshot(db); !equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(*Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Update after Close: %v", err)
	}
	db = open(t, path, Options{})
	if got := snapshot(db); !equal(got, want) {
		t.Fatalf("after reopen got %v, want %v", got, want)
	}
	if v := get(db, "a", "z"); v == nil {
		t.Fatal("empty value reads back as missing")
	}
}

func TestFailedFunctionDiscardsOnlyItsWrites(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "db"), Options{})
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = db.Update(func(tx *Tx) error {
				tx.Put("b", fmt.Sprint(i), []byte("v"))
				if i%2 == 1 {
					return fmt.Errorf("no %d", i)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		_, stored := snapshot(db)["b/"+fmt.Sprint(i)]
		if i%2 == 1 && (err == nil || err.Error() != fmt.Sprintf("no %d", i) || stored) {
			t.Errorf("write %d: err %v, stored %v; want its own error and nothing stored", i, err, stored)
		}
		if i%2 == 0 && (err != nil || !stored) {
			t.Errorf("write %d: err %v, stored %v", i, err, stored)
		}
	}
}

func TestConcurrentWritersShareRecords(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "db"), Options{})
	const n = 200
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			put(t, db, "k", fmt.Sprint(i), "v")
		}()
	}
	wg.Wait()
	if got := len(snapshot(db)); got != n {
		t.Fatalf("%d keys, want %d", got, n)
	}
	// Not a timing assertion: 200 writers racing a ~ms flush always
	// overlap, so at least some must have shared a record.
	if db.seq >= n {
		t.Fatalf("%d records for %d concurrent writes: nothing was grouped", db.seq, n)
	}
	t.Logf("%d writes in %d records", n, db.seq)
}

// writeSome writes n batches and returns the state after each (index 0 is
// before the first).
func writeSome(t *testing.T, db *DB, n int) []map[string]string {
	states := []map[string]string{snapshot(db)}
	for i := 0; i < n; i++ {
		if err := db.Update(func(tx *Tx) error {
			tx.Put("v", fmt.Sprint(i), bytes.Repeat([]byte{byte('a' + i)}, 100+i*300))
			if i > 0 {
				tx.Delete("v", fmt.Sprint(i-1))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		states = append(states, snapshot(db))
	}
	return states
}

func TestTornTailRecovers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "db")
	db, err := Open(path, Options{Grow: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	states := writeSome(t, db, 5)
	lastEnd := db.end
	db.Close()
	clean, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Find where the last record starts: replay the clean file.
	probe := open(t, path, Options{Grow: 64 << 10})
	if !equal(snapshot(probe), states[5]) {
		t.Fatal("clean reopen lost data")
	}
	probe.Close()
	var starts []int64
	for off, seq := int64(headerSize), uint64(0); ; {
		_, s, next, ok := probe.record(clean, off)
		if !ok || s != seq+1 {
			break
		}
		starts = append(starts, off)
		off, seq = next, s
	}
	if len(starts) != 5 {
		t.Fatalf("found %d records, want 5", len(starts))
	}
	last := starts[4]
	tear := map[string]func(b []byte){
		"header sector lost": func(b []byte) { clear(b[last : last+sector]) },
		"last sector lost":   func(b []byte) { clear(b[lastEnd-sector : lastEnd]) },
		"payload bit flip":   func(b []byte) { b[last+recHeader+7] ^= 1 },
		"file cut mid-record": func(b []byte) {
			clear(b[last+recHeader+50:])
		},
	}
	for name, f := range tear {
		t.Run(name, func(t *testing.T) {
			b := bytes.Clone(clean)
			f(b)
			p := filepath.Join(t.TempDir(), "db")
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			db := open(t, p, Options{Grow: 64 << 10})
			if got := snapshot(db); !equal(got, states[4]) {
				t.Fatalf("got %v, want the state before the torn record", got)
			}
			if err := db.Verify(); err != nil {
				t.Fatal(err)
			}
			put(t, db, "after", "k", "v")
			db.Close()
			db = open(t, p, Options{Grow: 64 << 10})
			if got := string(get(db, "after", "k")); got != "v" {
				t.Fatalf("write after recovery lost: %q", got)
			}
			if got := string(get(db, "v", "3")); got != states[4]["v/3"] {
				t.Fatalf("earlier data changed after recovery")
			}
		})
	}
	t.Run("truncated file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "db")
		if err := os.WriteFile(p, clean[:last+recHeader+3], 0o600); err != nil {
			t.Fatal(err)
		}
		db := open(t, p, Options{Grow: 64 << 10})
		if got := snapshot(db); !equal(got, states[4]) {
			t.Fatalf("got %v, want %v", got, states[4])
		}
		put(t, db, "after", "k", "v")
		if err := db.Verify(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMiddleCorruptionRefusesToOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeSome(t, db, 4)
	db.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[headerSize+recHeader+2] ^= 0x40 // first record's payload
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if db, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "corrupt") {
		if db != nil {
			db.Close()
		}
		t.Fatalf("Open of a file with a damaged first record: %v, want a corruption error", err)
	}
}

func TestForeignFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("not a journal "), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "not a csikit journal") {
		t.Fatalf("got %v", err)
	}
	b, _ := os.ReadFile(path)
	if !bytes.HasPrefix(b, []byte("not a journal")) {
		t.Fatal("the foreign file was modified")
	}
}

func TestAllZeroFileIsNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(path, make([]byte, 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	db := open(t, path, Options{})
	put(t, db, "a", "b", "c")
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

func TestSecondOpenIsLockedOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	open(t, path, Options{})
	start := time.Now()
	if _, err := Open(path, Options{LockTimeout: 100 * time.Millisecond}); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("second Open: %v", err)
	}
	if time.Since(start) < 100*time.Millisecond {
		t.Fatal("gave up before the timeout")
	}
}

func TestCompactionBoundsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	o := Options{Grow: 16 << 10, CompactAt: 64 << 10}
	db := open(t, path, o)
	want := map[string]string{}
	for i := 0; i < 3000; i++ {
		k := fmt.Sprint(i % 37)
		v := strings.Repeat(fmt.Sprint(i), 20)
		put(t, db, "c", k, v)
		want["c/"+k] = v
		if i%5 == 0 {
			if err := db.Update(func(tx *Tx) error { tx.Delete("c", "gone"); tx.Put("d", "x", []byte(v)); return nil }); err != nil {
				t.Fatal(err)
			}
			want["d/x"] = v
		}
	}
	db.settle()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// Without compaction 3,600 records of ≥ 512 bytes would be > 1.8 MB.
	if fi.Size() > 256<<10 {
		t.Fatalf("file is %d bytes: not compacted", fi.Size())
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("compaction left its temporary file: %v", err)
	}
	db.Close()
	db = open(t, path, o)
	if got := snapshot(db); !equal(got, want) {
		t.Fatalf("after compactions and reopen: %d keys, want %d", len(got), len(want))
	}
	// The replacement file is locked too.
	if _, err := Open(path, Options{LockTimeout: 50 * time.Millisecond}); err == nil {
		t.Fatal("compacted file opened twice")
	}
}

func TestWriteFailurePoisons(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db := open(t, path, Options{})
	put(t, db, "a", "k", "1")
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	good := db.f
	db.f = ro // every write now fails
	t.Cleanup(func() { good.Close() })
	if err := db.Update(func(tx *Tx) error { tx.Put("a", "k", []byte("2")); return nil }); err == nil {
		t.Fatal("write to a read-only file succeeded")
	}
	if got := string(get(db, "a", "k")); got != "1" {
		t.Fatalf("failed write became visible: %q", got)
	}
	err = db.Update(func(tx *Tx) error { tx.Put("a", "j", []byte("3")); return nil })
	if err == nil || !strings.Contains(err.Error(), "reopen") {
		t.Fatalf("write after a failure: %v, want refusal", err)
	}
}

func TestOversizedUpdateFailsAlone(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "db"), Options{})
	big := make([]byte, MaxRecord+1)
	if err := db.Update(func(tx *Tx) error { tx.Put("a", "big", big); return nil }); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized update: %v, want ErrTooLarge", err)
	}
	if err := db.Err(); err != nil {
		t.Fatalf("an oversized update poisoned the store: %v", err)
	}
	put(t, db, "a", "small", "ok")
}

func BenchmarkUpdateParallel(b *testing.B) {
	db := open(b, filepath.Join(b.TempDir(), "db"), Options{})
	b.SetParallelism(4)
	var n sync.Mutex
	i := 0
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.Lock()
			i++
			k := fmt.Sprint(i)
			n.Unlock()
			if err := db.Update(func(tx *Tx) error { tx.Put("b", k, make([]byte, 100)); return nil }); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func TestPanickingUpdateFailsAlone(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "db"), Options{})
	err := db.Update(func(tx *Tx) error { tx.Put("a", "k", []byte("x")); panic("driver bug") })
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("got %v", err)
	}
	if get(db, "a", "k") != nil {
		t.Fatal("a panicking update's write was kept")
	}
	put(t, db, "a", "k", "ok") // the store still takes writes
	if got := string(get(db, "a", "k")); got != "ok" {
		t.Fatalf("got %q", got)
	}
}

func TestBoltFileNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	page := make([]byte, 4096) // a bbolt meta page: 16-byte header, then the magic
	page[16], page[17], page[18], page[19] = 0xED, 0xDA, 0x0C, 0xED
	if err := os.WriteFile(path, page, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "bbolt") {
		t.Fatalf("got %v, want an error naming the old format", err)
	}
}

// BenchmarkCompactLarge rewrites a store of 80 MiB of live data (20,480
// values of 4 KiB) the way the leader does when the log has outgrown it:
// streamed as records of about 1 MiB, one flush, the rename.
func BenchmarkCompactLarge(b *testing.B) {
	db := open(b, filepath.Join(b.TempDir(), "db"), Options{})
	v := bytes.Repeat([]byte("0123456789abcdef"), 256)
	for batch := 0; batch < 20; batch++ {
		if err := db.Update(func(tx *Tx) error {
			for i := 0; i < 1024; i++ {
				tx.Put("vol", fmt.Sprintf("%02d-%04d", batch, i), v)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(db.live)
	b.ResetTimer()
	for b.Loop() {
		if _, err := db.compact(); err != nil { // no writer runs: the benchmark leads
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(db.snapshot), "records")
}

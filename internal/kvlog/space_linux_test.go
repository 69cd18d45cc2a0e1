package kvlog

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/internal/testenv"
)

// tinyTmpfs mounts a tmpfs of size bytes on a fresh directory and unmounts
// it when the test ends, also when it fails.
func tinyTmpfs(t *testing.T, size int64) string {
	t.Helper()
	testenv.RequireRoot(t, "mounts a tiny tmpfs to run the journal out of space")
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("csikit-kvlog-test", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system is full, and returns
// its path; removing it frees the space.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := bytes.Repeat([]byte{0xAB}, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			return p
		}
	}
}

// TestCompactionOutOfSpaceLeavesTheLogWritable runs the disk full while
// a compaction writes its replacement file: the old log stays the store,
// takes writes while its preallocated space lasts, refuses the ones that
// would grow it without poisoning anything, and once space returns every
// write works and compaction succeeds. Nothing acknowledged is lost.
func TestCompactionOutOfSpaceLeavesTheLogWritable(t *testing.T) {
	dir := tinyTmpfs(t, 2<<20)
	path := filepath.Join(dir, "db")
	o := Options{Grow: 64 << 10, CompactAt: 64 << 10}
	db := open(t, path, o)
	want := map[string]string{}
	val := func(i, gen int) string { return strings.Repeat(fmt.Sprintf("%d.%d|", i, gen), 10<<10/6) }
	for i := 0; i < 20; i++ {
		put(t, db, "v", fmt.Sprint(i), val(i, 0))
		want["v/"+fmt.Sprint(i)] = val(i, 0)
	}
	// Overwrite until the next few writes would trigger a compaction.
	gen := 1
	for db.end < 4*db.live-40<<10 {
		k := fmt.Sprint(gen % 20)
		put(t, db, "v", k, val(gen%20, gen))
		want["v/"+k] = val(gen%20, gen)
		gen++
	}
	// Room for a few more records in the log, none for a replacement.
	if err := db.grow(db.f, 96<<10); err != nil {
		t.Fatal(err)
	}
	filler := fillDisk(t, dir)

	var refused error
	for n := 0; n < 40; n++ { // about 360 KiB: passes the trigger, outgrows the room
		k := fmt.Sprint(gen % 20)
		v := val(gen%20, gen)
		err := db.Update(func(tx *Tx) error { tx.Put("v", k, []byte(v)); return nil })
		gen++
		if err != nil {
			refused = err
			break
		}
		want["v/"+k] = v
	}
	if refused == nil {
		t.Fatal("no write was refused on a full disk: the test did not fill it")
	}
	if !errors.Is(refused, syscall.ENOSPC) {
		t.Errorf("refused with %v, want an error wrapping ENOSPC", refused)
	}
	db.settle()
	if err := db.Err(); err != nil {
		t.Fatalf("out of space poisoned the store: %v", err)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("the failed compaction left its file behind: %v", err)
	}
	if got := snapshot(db); !equal(got, want) {
		t.Fatal("memory differs from what was acknowledged")
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	before := db.end
	for i := 0; i < 20; i++ {
		k := fmt.Sprint(i)
		put(t, db, "v", k, val(i, gen))
		want["v/"+k] = val(i, gen)
		gen++
	}
	if err := db.Update(func(tx *Tx) error { tx.Delete("v", "3"); return nil }); err != nil {
		t.Fatal(err)
	}
	delete(want, "v/3")
	db.settle()
	if db.end >= before {
		t.Errorf("log end %d, was %d: no compaction after space returned", db.end, before)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = open(t, path, o)
	if got := snapshot(db); !equal(got, want) {
		t.Fatalf("after reopen: %d keys, want %d (or values differ)", len(got), len(want))
	}
}

// TestLiveDataBeyondOneRecord keeps more live data than one record may
// hold (MaxRecord) and compacts it: writes and deletes keep working, also
// after a reopen. (Compaction is called as the leader calls it when the log
// is four times the live data; writing the 300 MB that takes would make
// the test slow, and TestCompactionBoundsTheFile covers the trigger.)
func TestLiveDataBeyondOneRecord(t *testing.T) {
	// On tmpfs: on a busy disk the flushes of 150 MB take many seconds.
	path := filepath.Join(tinyTmpfs(t, 256<<20), "db")
	o := Options{Grow: 16 << 20}
	db := open(t, path, o)
	const n, size = 5, 15 << 20 // 75 MiB live
	sums := map[string]uint32{}
	value := func(k string, gen int) []byte {
		pat := []byte(fmt.Sprintf("%s/%d.", k, gen))
		return bytes.Repeat(pat, size/len(pat)+1)[:size]
	}
	write := func(k string, gen int) {
		t.Helper()
		v := value(k, gen)
		if err := db.Update(func(tx *Tx) error { tx.Put("big", k, v); return nil }); err != nil {
			t.Fatal(err)
		}
		sums[k] = crc32.Checksum(v, castagnoli)
	}
	for i := 0; i < n; i++ {
		write(fmt.Sprint(i), 0)
	}
	if _, err := db.compact(); err != nil { // no writer runs: the test leads
		t.Fatalf("compact %d bytes of live data: %v", db.live, err)
	}
	if db.live <= MaxRecord {
		t.Fatalf("live data %d: the test wants more than one record holds", db.live)
	}
	if err := db.Update(func(tx *Tx) error { tx.Delete("big", "0"); return nil }); err != nil {
		t.Fatalf("delete after compaction: %v", err)
	}
	delete(sums, "0")
	put(t, db, "small", "k", "v")
	check := func(db *DB) {
		t.Helper()
		if err := db.Verify(); err != nil {
			t.Fatal(err)
		}
		db.View(func(r Reader) error {
			if r.Len("big") != len(sums) {
				t.Errorf("%d big values, want %d", r.Len("big"), len(sums))
			}
			for k, sum := range sums {
				if crc32.Checksum(r.Get("big", k), castagnoli) != sum {
					t.Errorf("value %s differs", k)
				}
			}
			if string(r.Get("small", "k")) != "v" {
				t.Error("small/k lost")
			}
			return nil
		})
	}
	db.Close()
	db = open(t, path, o) // replays the compacted snapshot and what followed
	check(db)
	write("1", 100)
	if err := db.Update(func(tx *Tx) error { tx.Delete("big", "2"); return nil }); err != nil {
		t.Fatalf("delete after reopen: %v", err)
	}
	delete(sums, "2")
	check(db)
}

// TestPoisonIsVisibleAndRecovers: a failed write poisons the store, Err
// says so, a recovery on a full disk fails and is retried, and once space
// returns the next write rewrites the file from memory and the store takes
// writes again, with everything acknowledged (and nothing else) in it.
func TestPoisonIsVisibleAndRecovers(t *testing.T) {
	dir := tinyTmpfs(t, 1<<20)
	path := filepath.Join(dir, "db")
	o := Options{Grow: 32 << 10, RetryAfter: 20 * time.Millisecond}
	db := open(t, path, o)
	want := map[string]string{}
	for i := 0; i < 50; i++ {
		k, v := fmt.Sprint(i), strings.Repeat("v", i*40)
		put(t, db, "a", k, v)
		want["a/"+k] = v
	}
	if err := db.Err(); err != nil {
		t.Fatalf("healthy store: Err = %v", err)
	}

	// Every write to the file now fails (EBADF): what a dying disk does.
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	good := db.f
	db.f = ro
	t.Cleanup(func() { good.Close() })
	if err := db.Update(func(tx *Tx) error { tx.Put("a", "lost", []byte("x")); return nil }); err == nil {
		t.Fatal("a write to a read-only descriptor succeeded")
	}
	poison := db.Err()
	if poison == nil || !errors.Is(poison, syscall.EBADF) {
		t.Fatalf("after a failed write Err = %v, want the failure (EBADF)", poison)
	}
	if err := db.Update(func(tx *Tx) error { tx.Put("a", "lost", []byte("y")); return nil }); err == nil || !strings.Contains(err.Error(), "earlier write failed") {
		t.Fatalf("write right after the failure: %v, want a refusal", err)
	}

	filler := fillDisk(t, dir)
	time.Sleep(2 * o.RetryAfter)
	err = db.Update(func(tx *Tx) error { tx.Put("a", "lost", []byte("z")); return nil })
	if err == nil || !strings.Contains(err.Error(), "rewriting the file failed") || !errors.Is(err, syscall.EBADF) {
		t.Fatalf("recovery on a full disk: %v, want it to fail naming both errors", err)
	}
	if db.Err() == nil {
		t.Fatal("a failed recovery cleared the poison")
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("the failed recovery left its file behind: %v", err)
	}
	if got := snapshot(db); !equal(got, want) {
		t.Fatal("memory differs from what was acknowledged")
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * o.RetryAfter)
	put(t, db, "a", "after", "ok")
	want["a/after"] = "ok"
	if err := db.Err(); err != nil {
		t.Fatalf("after recovery Err = %v", err)
	}
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = open(t, path, o)
	if got := snapshot(db); !equal(got, want) {
		t.Fatalf("after reopen: %d keys, want %d (or values differ)", len(got), len(want))
	}
}

// TestCutSnapshotIsRefused: a file whose compacted snapshot does not
// replay in full is refused as corrupt, not opened with part of the data.
func TestCutSnapshotIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db := open(t, path, Options{})
	for i := 0; i < 30; i++ {
		put(t, db, "a", fmt.Sprint(i), strings.Repeat("x", 100<<10))
	}
	if _, err := db.compact(); err != nil { // no writer runs: the test leads
		t.Fatal(err)
	}
	if db.snapshot < 3 {
		t.Fatalf("3 MB compacted into %d records, want several", db.snapshot)
	}
	put(t, db, "a", "after", "y")
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	clean, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	db = open(t, path, Options{})
	if got := len(snapshot(db)); got != 31 {
		t.Fatalf("clean reopen: %d keys, want 31", got)
	}
	db.Close()
	// The end of the second snapshot record.
	_, _, next, ok := db.record(clean, headerSize)
	if !ok {
		t.Fatal("first record does not verify")
	}
	_, _, cut, ok := db.record(clean, next)
	if !ok {
		t.Fatal("second record does not verify")
	}
	b := bytes.Clone(clean)
	clear(b[cut:])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if db, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "corrupt") {
		if db != nil {
			db.Close()
		}
		t.Fatalf("Open of a file cut inside its snapshot: %v, want a corruption error", err)
	}
}

// TestPoisonedStoreRecoversByReopening: closing a poisoned store and
// opening the file again needs no hand editing and loses nothing that was
// acknowledged.
func TestPoisonedStoreRecoversByReopening(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	db, err := Open(path, Options{RetryAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i < 20; i++ {
		put(t, db, "a", fmt.Sprint(i), strings.Repeat("x", i*100))
		want["a/"+fmt.Sprint(i)] = strings.Repeat("x", i*100)
	}
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	good := db.f
	db.f = ro
	if err := db.Update(func(tx *Tx) error { tx.Put("a", "lost", []byte("x")); return nil }); err == nil {
		t.Fatal("write to a read-only descriptor succeeded")
	}
	if db.Err() == nil {
		t.Fatal("not poisoned")
	}
	if err := db.Update(func(tx *Tx) error { tx.Put("a", "lost", []byte("y")); return nil }); err == nil {
		t.Fatal("a poisoned store took a write before RetryAfter")
	}
	db.Close()
	good.Close() // it held the lock
	db = open(t, path, Options{})
	if err := db.Err(); err != nil {
		t.Fatalf("reopened store: Err = %v", err)
	}
	if got := snapshot(db); !equal(got, want) {
		t.Fatalf("after reopen: %v, want the acknowledged %d keys", len(got), len(want))
	}
	put(t, db, "a", "after", "ok")
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
}

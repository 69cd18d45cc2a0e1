package journal_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/csikit/csikit/journal"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/internal/testenv"
)

type journalCloser interface {
	journal.Journal
	Close() error
}

type nopCloser struct{ *journal.Memory }

func (nopCloser) Close() error { return nil }

// stores returns a constructor per Journal implementation; all must behave
// the same.
func stores() map[string]func(tb testing.TB) journalCloser {
	return map[string]func(tb testing.TB) journalCloser{
		"memory": func(testing.TB) journalCloser { return nopCloser{journal.NewMemory()} },
		"file": func(tb testing.TB) journalCloser {
			j, err := journal.OpenFile(filepath.Join(tb.TempDir(), "j.db"), journal.FileOptions{})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = j.Close() })
			return j
		},
	}
}

func res(name, fp, id string) journal.Reservation {
	return journal.Reservation{Kind: journal.KindVolume, Name: name, Fingerprint: []byte(fp), ID: id}
}

func TestJournalSemantics(t *testing.T) {
	ctx := context.Background()
	for storeName, open := range stores() {
		t.Run(storeName, func(t *testing.T) {
			j := open(t)
			rec, err := j.Reserve(ctx, res("pvc-1", "fp-a", "id-1"))
			if err != nil || rec.ID != "id-1" || rec.Committed || rec.Name != "pvc-1" {
				t.Fatalf("first Reserve: got %+v, %v; want ID id-1, not committed", rec, err)
			}
			// Retry with the same fingerprint: same ID, new candidate ignored.
			rec, err = j.Reserve(ctx, res("pvc-1", "fp-a", "id-other"))
			if err != nil || rec.ID != "id-1" {
				t.Fatalf("retry Reserve: got %+v, %v; want ID id-1", rec, err)
			}
			_, err = j.Reserve(ctx, res("pvc-1", "fp-b", "id-2"))
			testenv.WantCode(t, err, codes.AlreadyExists) // Reserve with another fingerprint
			_, err = j.Reserve(ctx, res("pvc-2", "fp-a", "id-1"))
			testenv.WantCode(t, err, codes.Internal) // Reserve of a taken ID

			// Kinds are separate name spaces.
			snap := journal.Reservation{Kind: journal.KindSnapshot, Name: "pvc-1", Fingerprint: []byte("x"), ID: "id-1"}
			if rec, err := j.Reserve(ctx, snap); err != nil || rec.ID != "id-1" {
				t.Fatalf("snapshot with a volume's name and ID: got %+v, %v; want ID id-1", rec, err)
			}

			testenv.WantCode(t, j.Commit(ctx, journal.KindVolume, "nope", "id-9", nil), codes.FailedPrecondition) // Commit without reservation
			if err := j.Commit(ctx, journal.KindVolume, "pvc-1", "id-1", []byte("resp")); err != nil {
				t.Fatal(err)
			}
			rec, ok, err := j.LookupName(ctx, journal.KindVolume, "pvc-1")
			if err != nil || !ok || !rec.Committed || string(rec.Response) != "resp" || string(rec.Fingerprint) != "fp-a" {
				t.Fatalf("LookupName after Commit: got %+v, %v, %v", rec, ok, err)
			}
			if rec.Reserved.IsZero() {
				t.Error("Reserved time: got zero, want set")
			}
			rec, ok, err = j.LookupID(ctx, journal.KindVolume, "id-1")
			if err != nil || !ok || rec.Name != "pvc-1" {
				t.Fatalf("LookupID: got %+v, %v, %v; want name pvc-1", rec, ok, err)
			}
			if _, ok, err := j.LookupID(ctx, journal.KindVolume, "id-x"); ok || err != nil {
				t.Fatalf("LookupID of unknown ID: got %v, %v; want false, nil", ok, err)
			}

			// Commit under another ID rebinds.
			if _, err := j.Reserve(ctx, res("pvc-3", "f", "id-3")); err != nil {
				t.Fatal(err)
			}
			testenv.WantCode(t, j.Commit(ctx, journal.KindVolume, "pvc-3", "id-1", nil), codes.Internal) // Commit rebinding to a taken ID
			if err := j.Commit(ctx, journal.KindVolume, "pvc-3", "id-3b", []byte("r3")); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := j.LookupID(ctx, journal.KindVolume, "id-3"); ok {
				t.Error("old ID after rebinding: got found, want gone")
			}
			if rec, ok, _ := j.LookupID(ctx, journal.KindVolume, "id-3b"); !ok || rec.Name != "pvc-3" {
				t.Errorf("new ID after rebinding: got %+v, %v; want pvc-3", rec, ok)
			}

			// Release forgets both directions, and is idempotent.
			for range 2 {
				if err := j.Release(ctx, journal.KindVolume, "id-1"); err != nil {
					t.Fatal(err)
				}
			}
			if _, ok, _ := j.LookupName(ctx, journal.KindVolume, "pvc-1"); ok {
				t.Error("name after Release: got found, want gone")
			}
			if rec, ok, _ := j.LookupID(ctx, journal.KindSnapshot, "id-1"); !ok || rec.Name != "pvc-1" {
				t.Error("Release of a volume removed the snapshot of the same ID")
			}
			// After release the name may be reserved anew, with any fingerprint.
			if rec, err := j.Reserve(ctx, res("pvc-1", "fp-b", "id-new")); err != nil || rec.ID != "id-new" {
				t.Fatalf("Reserve after Release: got %+v, %v; want id-new", rec, err)
			}

			// Bad input.
			_, err = j.Reserve(ctx, res("", "f", "i"))
			testenv.WantCode(t, err, codes.InvalidArgument) // empty name
			_, err = j.Reserve(ctx, res("n", "f", ""))
			testenv.WantCode(t, err, codes.InvalidArgument) // empty ID
			_, err = j.Reserve(ctx, res(strings.Repeat("n", journal.MaxKeyLen+1), "f", "i"))
			testenv.WantCode(t, err, codes.InvalidArgument) // oversized name
			_, _, err = j.LookupID(ctx, journal.KindVolume, strings.Repeat("i", journal.MaxKeyLen+1))
			testenv.WantCode(t, err, codes.InvalidArgument) // oversized ID
			_, err = j.Reserve(ctx, journal.Reservation{Kind: 99, Name: "n", ID: "i"})
			testenv.WantCode(t, err, codes.InvalidArgument) // unknown kind
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err = j.Reserve(cctx, res("n", "f", "i"))
			testenv.WantCode(t, err, codes.Canceled) // canceled context
		})
	}
}

// TestJournalOpaqueKeys stores names that would be dangerous as file names.
func TestJournalOpaqueKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	j, err := journal.OpenFile(filepath.Join(dir, "j.db"), journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i, name := range []string{"../../etc/passwd", "/abs/path", "a\x00b", "名前", "$(rm -rf /)"} {
		id := "../id-" + strconv.Itoa(i)
		if rec, err := j.Reserve(ctx, res(name, "f", id)); err != nil || rec.ID != id {
			t.Fatalf("Reserve %q: got %+v, %v", name, rec, err)
		}
		if rec, ok, err := j.LookupID(ctx, journal.KindVolume, id); err != nil || !ok || rec.Name != name {
			t.Fatalf("LookupID %q: got %+v, %v, %v; want name %q", id, rec, ok, err, name)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(matches) != 1 {
		t.Errorf("files in the journal directory: got %v, want only j.db", matches)
	}
}

func TestFileJournalPersists(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "j.db")
	j, err := journal.OpenFile(path, journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Reserve(ctx, res("pvc-1", "f", "id-1")); err != nil {
		t.Fatal(err)
	}
	if err := j.Commit(ctx, journal.KindVolume, "pvc-1", "id-1", []byte("resp")); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Reserve(ctx, res("pvc-2", "f", "id-2")); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = j.Reserve(ctx, res("pvc-3", "f", "id-3"))
	if err == nil {
		t.Error("Reserve after Close: got nil error, want one")
	}
	j, err = journal.OpenFile(path, journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.Check(); err != nil {
		t.Fatal(err)
	}
	rec, err := j.Reserve(ctx, res("pvc-1", "f", "other"))
	if err != nil || rec.ID != "id-1" || !rec.Committed || string(rec.Response) != "resp" {
		t.Errorf("pvc-1 after reopen: got %+v, %v; want committed id-1", rec, err)
	}
	rec, err = j.Reserve(ctx, res("pvc-2", "f", "other"))
	if err != nil || rec.ID != "id-2" || rec.Committed {
		t.Errorf("pvc-2 after reopen: got %+v, %v; want reserved id-2", rec, err)
	}
}

// TestJournalConcurrentReserve has hundreds of goroutines reserve a few
// names with distinct candidate IDs: each name must end with one ID, and
// every caller must get it.
func TestJournalConcurrentReserve(t *testing.T) {
	ctx := context.Background()
	for storeName, open := range stores() {
		t.Run(storeName, func(t *testing.T) {
			j := open(t)
			const goroutines, names = 200, 10
			var got [names]sync.Map
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n := g % names
					rec, err := j.Reserve(ctx, res("pvc-"+strconv.Itoa(n), "f", "id-"+strconv.Itoa(g)))
					if err != nil {
						t.Error(err)
						return
					}
					got[n].Store(rec.ID, true)
				}()
			}
			wg.Wait()
			for n := range names {
				var ids []any
				got[n].Range(func(k, _ any) bool { ids = append(ids, k); return true })
				if len(ids) != 1 {
					t.Errorf("pvc-%d: got IDs %v, want exactly one", n, ids)
				}
			}
		})
	}
}

func benchReserveCommit(b *testing.B, j journal.Journal, parallel bool) {
	ctx := context.Background()
	var n atomic.Int64
	one := func() {
		i := strconv.FormatInt(n.Add(1), 10)
		if _, err := j.Reserve(ctx, res("pvc-"+i, "fingerprint", "id-"+i)); err != nil {
			b.Fatal(err)
		}
		if err := j.Commit(ctx, journal.KindVolume, "pvc-"+i, "id-"+i, []byte("response")); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	if !parallel {
		for b.Loop() {
			one()
		}
		return
	}
	b.SetParallelism(4) // 8 callers on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			one()
		}
	})
}

func BenchmarkJournalReserveCommit(b *testing.B) {
	for _, name := range []string{"memory", "file"} {
		for _, parallel := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/parallel=%v", name, parallel), func(b *testing.B) {
				benchReserveCommit(b, stores()[name](b), parallel)
			})
		}
	}
}

// TestFileVolatile: a volatile reservation writes nothing to the file
// (the point of the option: one flush per create), its commit writes the
// reservation with it, and fence records refuse to be volatile.
func TestFileVolatile(t *testing.T) {
	ctx := context.Background()
	if _, err := journal.OpenFile(filepath.Join(t.TempDir(), "j.db"), journal.FileOptions{Volatile: []journal.Kind{journal.KindFence}}); err == nil {
		t.Error("OpenFile took volatile fence records")
	}
	for _, volatile := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "j.db")
		o := journal.FileOptions{}
		if volatile {
			o.Volatile = []journal.Kind{journal.KindVolume}
		}
		j, err := journal.OpenFile(path, o)
		if err != nil {
			t.Fatal(err)
		}
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: "pvc-1", Fingerprint: []byte("f"), ID: "vol-1"})
		if err != nil || !rec.Fresh {
			t.Fatalf("volatile=%v: Reserve: %+v, %v", volatile, rec, err)
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if wrote := !bytes.Equal(before, after); wrote == volatile {
			t.Errorf("volatile=%v: Reserve wrote to the file: %v", volatile, wrote)
		}
		if got, ok, err := j.LookupID(ctx, journal.KindVolume, "vol-1"); !ok || err != nil || got.Name != "pvc-1" || got.Committed {
			t.Errorf("volatile=%v: LookupID of the reservation: %+v, %v, %v", volatile, got, ok, err)
		}
		if err := j.Commit(ctx, journal.KindVolume, "pvc-1", "vol-1", []byte("r")); err != nil {
			t.Fatal(err)
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		j, err = journal.OpenFile(path, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.Check(); err != nil {
			t.Errorf("volatile=%v: %v", volatile, err)
		}
		got, ok, err := j.LookupID(ctx, journal.KindVolume, "vol-1")
		if !ok || err != nil || got.Name != "pvc-1" || !got.Committed || string(got.Response) != "r" || got.Reserved.IsZero() {
			t.Errorf("volatile=%v: after commit and reopen: %+v, %v, %v", volatile, got, ok, err)
		}
		j.Close()
	}
}

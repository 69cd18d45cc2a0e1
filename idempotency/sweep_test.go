package idempotency_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/idempotency"
)

func TestSweep(t *testing.T) {
	stores := map[string]func(t *testing.T) idempotency.Lister{
		"memory": func(*testing.T) idempotency.Lister { return idempotency.NewMemoryJournal() },
		"file": func(t *testing.T) idempotency.Lister {
			j, err := idempotency.OpenFileJournal(filepath.Join(t.TempDir(), "j"), idempotency.FileJournalOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { j.Close() })
			return j
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			j := open(t)
			reserve := func(name, id string) {
				t.Helper()
				if _, err := j.Reserve(ctx, idempotency.Reservation{Kind: idempotency.KindVolume, Name: name, ID: id, Fingerprint: []byte("f")}); err != nil {
					t.Fatal(err)
				}
			}
			reserve("abandoned", "id-a")
			reserve("fails-clean", "id-f")
			reserve("busy", "id-b")
			reserve("done", "id-d")
			if err := j.Commit(ctx, idempotency.KindVolume, "done", "id-d", []byte("resp")); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Reserve(ctx, idempotency.Reservation{Kind: idempotency.KindSnapshot, Name: "snap", ID: "id-s", Fingerprint: []byte("f")}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // a margin for a loaded machine: "young" must stay younger than OlderThan
			reserve("young", "id-y")

			locks := idempotency.NewLockTable()
			// A retry of "busy" is running: it holds the ID lock.
			if _, ok := locks.TryLock(idempotency.Key{Space: idempotency.SpaceVolume, ID: "id-b"}, idempotency.Exclusive, idempotency.Owner{Method: "retry"}); !ok {
				t.Fatal("could not take the test lock")
			}
			var cleaned []string
			n, err := idempotency.Sweep(ctx, idempotency.SweepOptions{
				Journal: j, Locks: locks, Kind: idempotency.KindVolume, OlderThan: 250 * time.Millisecond,
				Clean: func(_ context.Context, rec idempotency.Record) error {
					cleaned = append(cleaned, rec.ID)
					if rec.ID == "id-f" {
						return errors.New("backend unreachable")
					}
					return nil
				},
			})
			if n != 1 || err == nil || !strings.Contains(err.Error(), "backend unreachable") {
				t.Fatalf("Sweep: released %d, err %v; want 1 released and the clean error", n, err)
			}
			slices.Sort(cleaned)
			if !slices.Equal(cleaned, []string{"id-a", "id-f"}) {
				t.Errorf("cleaned %v, want id-a and id-f (not the busy, committed, young or snapshot ones)", cleaned)
			}
			for name, want := range map[string]bool{"abandoned": false, "fails-clean": true, "busy": true, "done": true, "young": true} {
				if _, ok, _ := j.LookupName(ctx, idempotency.KindVolume, name); ok != want {
					t.Errorf("%s: reserved %v, want %v", name, ok, want)
				}
			}
			if _, ok, _ := j.LookupName(ctx, idempotency.KindSnapshot, "snap"); !ok {
				t.Error("a volume sweep released a snapshot reservation")
			}
			// A retry after the sweep gets a fresh reservation.
			rec, err := j.Reserve(ctx, idempotency.Reservation{Kind: idempotency.KindVolume, Name: "abandoned", ID: "id-new", Fingerprint: []byte("f")})
			if err != nil || rec.ID != "id-new" {
				t.Errorf("retry after sweep: %+v, %v", rec, err)
			}
		})
	}
}

func TestSweepNeedsCleanAndJournal(t *testing.T) {
	if _, err := idempotency.Sweep(context.Background(), idempotency.SweepOptions{Kind: idempotency.KindVolume}); err == nil {
		t.Fatal("Sweep without a journal and Clean succeeded")
	}
}

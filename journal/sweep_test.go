package journal_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/journal"

	"github.com/csikit/csikit/locks"
)

func TestSweep(t *testing.T) {
	stores := map[string]func(t *testing.T) journal.Lister{
		"memory": func(*testing.T) journal.Lister { return journal.NewMemory() },
		"file": func(t *testing.T) journal.Lister {
			j, err := journal.OpenFile(filepath.Join(t.TempDir(), "j"), journal.FileOptions{})
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
				if _, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: name, ID: id, Fingerprint: []byte("f")}); err != nil {
					t.Fatal(err)
				}
			}
			reserve("abandoned", "id-a")
			reserve("fails-clean", "id-f")
			reserve("busy", "id-b")
			reserve("done", "id-d")
			if err := j.Commit(ctx, journal.KindVolume, "done", "id-d", []byte("resp")); err != nil {
				t.Fatal(err)
			}
			if _, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindSnapshot, Name: "snap", ID: "id-s", Fingerprint: []byte("f")}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // a margin for a loaded machine: "young" must stay younger than OlderThan
			reserve("young", "id-y")

			tab := locks.NewTable()
			// A retry of "busy" is running: it holds the ID lock.
			if _, ok := tab.TryLock(locks.Key{Space: locks.SpaceVolume, ID: "id-b"}, locks.Exclusive, locks.Owner{Method: "retry"}); !ok {
				t.Fatal("could not take the test lock")
			}
			var cleaned []string
			n, err := journal.Sweep(ctx, journal.SweepOptions{
				Journal: j, Locks: tab, Kind: journal.KindVolume, OlderThan: 250 * time.Millisecond,
				Clean: func(_ context.Context, rec journal.Record) error {
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
				if _, ok, _ := j.LookupName(ctx, journal.KindVolume, name); ok != want {
					t.Errorf("%s: reserved %v, want %v", name, ok, want)
				}
			}
			if _, ok, _ := j.LookupName(ctx, journal.KindSnapshot, "snap"); !ok {
				t.Error("a volume sweep released a snapshot reservation")
			}
			// A retry after the sweep gets a fresh reservation.
			rec, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: "abandoned", ID: "id-new", Fingerprint: []byte("f")})
			if err != nil || rec.ID != "id-new" {
				t.Errorf("retry after sweep: %+v, %v", rec, err)
			}
		})
	}
}

func TestSweepNeedsCleanAndJournal(t *testing.T) {
	if _, err := journal.Sweep(context.Background(), journal.SweepOptions{Kind: journal.KindVolume}); err == nil {
		t.Fatal("Sweep without a journal and Clean succeeded")
	}
}

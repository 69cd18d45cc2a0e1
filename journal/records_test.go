package journal_test

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/journal"
)

// Records lists committed and uncommitted records of one kind, in name
// order, and the fence kind survives a reopen of the file store.
func TestRecordsListsEveryRecordOfAKind(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "journal.db")
	f, err := journal.OpenFile(path, journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range []journal.RecordLister{journal.NewMemory(), f} {
		for _, n := range []string{"b", "a", "c"} {
			if _, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindFence, Name: n, ID: n}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: "v", ID: "v"}); err != nil {
			t.Fatal(err)
		}
		if err := j.Commit(ctx, journal.KindFence, "a", "a", nil); err != nil {
			t.Fatal(err)
		}
		recs, err := j.Records(ctx, journal.KindFence)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 3 || recs[0].Name != "a" || !recs[0].Committed || recs[1].Name != "b" || recs[1].Committed || recs[2].Name != "c" {
			t.Fatalf("%T: Records(fence) = %+v, want a (committed), b, c", j, recs)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = journal.OpenFile(path, journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := f.Records(ctx, journal.KindFence)
	if err != nil || len(recs) != 3 || !recs[0].Committed {
		t.Fatalf("after reopen: Records(fence) = %+v, %v; want 3 with a committed", recs, err)
	}
	if err := f.Check(); err != nil {
		t.Fatal(err)
	}
	if journal.KindFence.String() != "fence" {
		t.Fatalf("KindFence.String() = %q", journal.KindFence.String())
	}
}

// Sweep never releases a fence: an unconfirmed fence is no abandoned
// create.
func TestSweepRefusesFences(t *testing.T) {
	j := journal.NewMemory()
	_, err := journal.Sweep(context.Background(), journal.SweepOptions{
		Journal: j, Kind: journal.KindFence,
		Clean: func(context.Context, journal.Record) error { return nil },
	})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Sweep(KindFence) = %v, want InvalidArgument", err)
	}
}

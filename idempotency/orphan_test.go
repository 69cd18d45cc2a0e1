package idempotency_test

import (
	"context"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/idempotency"

	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/journal"
)

// TestRefusedRetryKeepsAnEarlierAttemptsReservation: the first attempt of
// a create builds the backend object and then fails with a retryable error
// (its reservation stays); the retry is refused with a "releasable" code
// (here AlreadyExists, which a backend answers because the object from
// the first attempt is there). The retry must not drop the reservation:
// it is the only record of the object, and the sweep finds it through it.
// A refusal of a first attempt still drops the reservation it made.
func TestRefusedRetryKeepsAnEarlierAttemptsReservation(t *testing.T) {
	journals := map[string]func(t *testing.T) journal.Journal{
		"memory": func(*testing.T) journal.Journal { return journal.NewMemory() },
		"file": func(t *testing.T) journal.Journal {
			j, err := journal.OpenFile(filepath.Join(t.TempDir(), "journal"), journal.FileOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { j.Close() })
			return j
		},
	}
	for jname, newJournal := range journals {
		for _, code := range []codes.Code{codes.InvalidArgument, codes.OutOfRange, codes.AlreadyExists, codes.Unimplemented, codes.NotFound} {
			t.Run(jname+"/"+code.String(), func(t *testing.T) {
				ctx := context.Background()
				j := newJournal(t)
				ic := newIC(t, idempotency.Options{Journal: j})
				d := newFakeDriver()
				// Attempt 1: builds the object, then times out.
				_, err := call(ctx, ic, mCreate, createVol("pvc"), func(ctx context.Context, req any) (any, error) {
					if _, err := d.handler(ctx, req); err != nil {
						return nil, err
					}
					return nil, status.Error(codes.DeadlineExceeded, "backend slow")
				})
				testenv.WantCode(t, err, codes.DeadlineExceeded) // first attempt
				first, ok, _ := j.LookupName(ctx, journal.KindVolume, "pvc")
				if !ok {
					t.Fatal("the first attempt's reservation is gone")
				}
				// Attempt 2 (same request): refused.
				d.fail = status.Error(code, "refused")
				_, err = call(ctx, ic, mCreate, createVol("pvc"), d.handler)
				testenv.WantCode(t, err, code) // retry
				rec, ok, _ := j.LookupName(ctx, journal.KindVolume, "pvc")
				if !ok || rec.ID != first.ID {
					t.Fatalf("after a refused retry: reservation %+v, %v; want the first attempt's (ID %q) kept", rec, ok, first.ID)
				}
				if d.objects[first.ID] != "pvc" {
					t.Fatal("test bug: the first attempt built nothing")
				}
				// Attempt 3 succeeds and adopts the object under the same ID.
				d.fail = nil
				if got := volID(t, ic, createVol("pvc"), d.handler); got != first.ID {
					t.Errorf("retry got ID %q, want %q", got, first.ID)
				}
				// A refused first attempt of another name drops what it made.
				d.fail = status.Error(code, "refused")
				_, err = call(ctx, ic, mCreate, createVol("other"), d.handler)
				testenv.WantCode(t, err, code) // refused first attempt
				if _, ok, _ := j.LookupName(ctx, journal.KindVolume, "other"); ok {
					t.Error("a refused first attempt kept its reservation")
				}
			})
		}
	}
}

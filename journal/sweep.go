package journal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/locks"
)

// Lister is a Journal that can list the reservations never committed.
// Memory and File implement it.
type Lister interface {
	Journal
	// Uncommitted returns the reservations of kind that were never
	// committed and were made before reservedBefore, oldest first.
	Uncommitted(ctx context.Context, kind Kind, reservedBefore time.Time) ([]Record, error)
}

// SweepOptions configures Sweep.
type SweepOptions struct {
	// Journal is the driver's journal. Required.
	Journal Lister
	// Locks is the lock table of the server using Journal (see
	// csikit.Server.Locks), so a sweep never races a retry of the same
	// create. Nil when nothing serves the journal yet.
	Locks *locks.Table
	// Kind is which reservations to sweep. Required.
	Kind Kind
	// OlderThan is how long a reservation must have stood uncommitted to
	// count as abandoned. The external provisioner retries a failing
	// create for as long as its PVC exists, backing off to minutes, so a
	// reservation that old is either abandoned or failing for a reason a
	// fresh start would not fix. Default 24h.
	OlderThan time.Duration
	// Clean removes whatever the driver made under rec.ID (there may be
	// nothing, or a half-made object). It runs with the name and ID locked.
	// An error keeps the reservation for the next sweep. Required.
	Clean func(ctx context.Context, rec Record) error
}

// Sweep releases abandoned reservations: creates that failed after the
// journal reserved their name (with an error after which the retry must
// reuse the ID) and were never retried to success — typically because the
// PVC was deleted meanwhile. Each one's leftovers are cleaned by
// o.Clean, then its reservation released, with its name and ID locked;
// reservations whose locks are held (a retry is running now) are skipped.
// A retry that comes after the sweep gets a new reservation and a new ID,
// which is safe because Clean removed the old one's object.
//
// It returns how many reservations were released, and the errors of those
// that were not.
func Sweep(ctx context.Context, o SweepOptions) (int, error) {
	if o.Journal == nil || o.Clean == nil {
		return 0, status.Error(codes.InvalidArgument, "journal: Sweep needs a Journal and a Clean function")
	}
	if !o.Kind.valid() {
		return 0, status.Errorf(codes.InvalidArgument, "journal: Sweep: unknown kind %d", uint8(o.Kind))
	}
	if o.Kind == KindFence {
		// An unconfirmed fence is a node treated as fenced, not an
		// abandoned create: releasing it would let the node back in.
		return 0, status.Error(codes.InvalidArgument, "journal: Sweep: fence records are not reservations; csikit.Server.Unfence lifts them")
	}
	if o.OlderThan <= 0 {
		o.OlderThan = 24 * time.Hour
	}
	if o.Locks == nil {
		o.Locks = locks.NewTable()
	}
	recs, err := o.Journal.Uncommitted(ctx, o.Kind, time.Now().Add(-o.OlderThan))
	if err != nil {
		return 0, err
	}
	released := 0
	var errs []error
	for _, rec := range recs {
		if err := ctx.Err(); err != nil {
			errs = append(errs, status.FromContextError(err).Err())
			break
		}
		set := locks.Set{Table: o.Locks, Owner: locks.Owner{Method: "journal.Sweep", Since: time.Now()}}
		if err := set.Acquire(
			locks.Lock{Key: o.Kind.NameKey(rec.Name), Mode: locks.Exclusive},
			locks.Lock{Key: o.Kind.IDKey(rec.ID), Mode: locks.Exclusive},
		); err != nil {
			continue // a call on it is running: not abandoned after all
		}
		err := func() error {
			defer set.Release()
			// Re-read under the locks: a retry may have committed it.
			now, ok, err := o.Journal.LookupName(ctx, o.Kind, rec.Name)
			if err != nil || !ok || now.Committed || now.ID != rec.ID {
				return err
			}
			if err := o.Clean(ctx, rec); err != nil {
				return fmt.Errorf("clean %s %q (name %q): %w", o.Kind, rec.ID, rec.Name, err)
			}
			if err := o.Journal.Release(ctx, o.Kind, rec.ID); err != nil {
				return err
			}
			released++
			return nil
		}()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return released, errors.Join(errs...)
}

// RecordLister is a Journal that can list every record of a kind,
// committed or not. Memory and File implement it; csikit's Server needs
// it to know, at start, which nodes it fenced (KindFence).
type RecordLister interface {
	Journal
	// Records returns every record of kind, in name order.
	Records(ctx context.Context, kind Kind) ([]Record, error)
}

package driver

import (
	"context"
	"errors"
	"time"

	"github.com/ceph/go-ceph/rbd"

	"github.com/csikit/csikit/idempotency"
)

// SweepAbandoned runs idempotency.Sweep on the journal of every pool
// served since start (with the credentials it was served with): it removes
// the image or snapshot left by a create that failed more than olderThan
// ago and was never retried, and releases its reservation. locks is the
// server's lock table (csikit.Server.Locks).
func (d *Driver) SweepAbandoned(ctx context.Context, locks *idempotency.LockTable, kind idempotency.Kind, olderThan time.Duration) (int, error) {
	var total int
	var errs []error
	for _, p := range d.seenPools() {
		n, err := idempotency.Sweep(ctx, idempotency.SweepOptions{
			Journal: NewOmapJournal(d.conns, p.creds, p.pool), Locks: locks, Kind: kind, OlderThan: olderThan,
			Clean: func(ctx context.Context, rec idempotency.Record) error { return d.clean(ctx, p, kind, rec.ID) },
		})
		total += n
		errs = append(errs, err)
	}
	return total, errors.Join(errs...)
}

// clean removes what a create under id may have left.
func (d *Driver) clean(ctx context.Context, p seenPool, kind idempotency.Kind, id string) error {
	io, done, err := d.conns.IOContext(ctx, p.creds, p.pool, "")
	if err != nil {
		return err
	}
	defer done()
	switch kind {
	case idempotency.KindVolume:
		v, ok := parseVolumeID(id)
		if !ok {
			return nil
		}
		if err := rbd.RemoveImage(io, v.image()); err != nil && !errors.Is(err, rbd.ErrNotFound) {
			return backendError(err, "remove abandoned image")
		}
	case idempotency.KindSnapshot:
		s, ok := parseSnapshotID(id)
		if !ok {
			return nil
		}
		img, err := findSnapshotImage(io, s)
		if err != nil || img == nil {
			return err
		}
		defer img.Close()
		if err := img.GetSnapshot(s.snap()).Remove(); err != nil && !errors.Is(err, rbd.ErrNotFound) {
			return backendError(err, "remove abandoned snapshot")
		}
	}
	return nil
}

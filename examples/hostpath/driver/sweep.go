//go:build linux

package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/csikit/csikit/journal"

	"github.com/csikit/csikit/locks"
)

// SweepAbandoned removes what creates that never completed left behind —
// volumes, snapshots and group snapshots whose journal reservation was
// never committed and is older than olderThan (journal.Sweep) — and
// releases their reservations. locks is the server's lock table
// (csikit.Server.Locks), so a create being retried right now is skipped.
// It returns how many reservations it released.
func (d *Driver) SweepAbandoned(ctx context.Context, locks *locks.Table, olderThan time.Duration) (int, error) {
	total := 0
	var errs []error
	for _, k := range []struct {
		kind  journal.Kind
		clean func(context.Context, journal.Record) error
	}{
		{journal.KindGroupSnapshot, d.cleanGroup}, // before snapshots: members are snapshots
		{journal.KindSnapshot, d.cleanSnapshot},
		{journal.KindVolume, d.cleanVolume},
	} {
		n, err := journal.Sweep(ctx, journal.SweepOptions{
			Journal: d.journal, Locks: locks, Kind: k.kind, OlderThan: olderThan, Clean: k.clean,
		})
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	if total > 0 {
		d.log.Info("released abandoned reservations", "count", total)
	}
	return total, errors.Join(errs...)
}

// cleanVolume removes an uncommitted volume: its metadata, if the create got
// that far, and its data of either kind. The CO never learned its ID, so it
// cannot be staged or published.
func (d *Driver) cleanVolume(ctx context.Context, rec journal.Record) error {
	if !validID(rec.ID) {
		return nil // no path was ever built from it
	}
	v, known := d.store.volume(rec.ID)
	if known {
		if err := d.detachIfAttached(ctx, &v); err != nil {
			return err
		}
	}
	for _, k := range []kind{kindDir, kindBlock} {
		x := &volume{ID: rec.ID, Kind: k}
		if known && v.Kind == k {
			x = &v // with its project, to drop the quota too
		}
		if err := d.removeData(ctx, x); err != nil {
			return err // a mount below: keep the reservation for the next sweep
		}
	}
	if known {
		if err := d.store.delVolume(ctx, rec.ID); err != nil {
			return err
		}
	}
	// A reservation of capacity whose create answered but whose commit
	// never became durable, and was never retried, is returned here.
	d.ledger.release(rec.ID)
	return d.leftover(d.volumeDir(rec.ID), d.volumeImage(rec.ID))
}

func (d *Driver) cleanSnapshot(ctx context.Context, rec journal.Record) error {
	if !validID(rec.ID) {
		return nil
	}
	return d.dropSnapshot(ctx, rec.ID)
}

// dropSnapshot removes snapshot id's metadata, its data of either kind and
// a partial copy (a create killed mid-copy), and returns its capacity
// reservation.
func (d *Driver) dropSnapshot(ctx context.Context, id string) error {
	if _, ok := d.store.snapshot(id); ok {
		if err := d.store.delSnapshot(ctx, id); err != nil {
			return err
		}
	}
	if err := d.removeSnapshotLeftovers(ctx, id); err != nil {
		return err
	}
	d.ledger.release(snapshotKey(id))
	return d.leftover(d.snapshotPath(id, kindDir), d.snapshotPath(id, kindBlock), partialCopy(d.snapshotPath(id, kindDir)))
}

// cleanGroup removes an uncommitted group snapshot and its members (IDs
// "<group>-<i>", see CreateVolumeGroupSnapshot).
func (d *Driver) cleanGroup(ctx context.Context, rec journal.Record) error {
	if !validID(rec.ID) {
		return nil
	}
	for i := 0; ; i++ {
		sid := fmt.Sprintf("%s-%d", rec.ID, i)
		_, inStore := d.store.snapshot(sid)
		if !validID(sid) || (!inStore && !exists(d.snapshotPath(sid, kindDir)) && !exists(d.snapshotPath(sid, kindBlock)) &&
			!exists(partialCopy(d.snapshotPath(sid, kindDir))) && !d.ledger.holds(snapshotKey(sid))) {
			break
		}
		if err := d.dropSnapshot(ctx, sid); err != nil {
			return err
		}
	}
	if _, ok := d.store.group(rec.ID); ok {
		return d.store.delGroup(ctx, rec.ID)
	}
	return nil
}

// leftover fails if any of paths still exists, so the reservation is kept
// for the next sweep.
func (d *Driver) leftover(paths ...string) error {
	for _, p := range paths {
		if exists(p) {
			return fmt.Errorf("%s could not be removed", p)
		}
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

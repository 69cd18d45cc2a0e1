package driver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/ceph/go-ceph/rbd"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/journal"
)

// SweepAbandoned sweeps the journal of every pool served since start
// (with the credentials it was served with; OmapJournal.Sweep): it removes
// the image or snapshot left by a create that failed more than olderThan
// ago, was never retried and whose lease (Options.CreateLease) expired,
// and releases its reservation. Every replica may sweep at once: each
// reservation is claimed in RADOS first, so a sweep never overtakes a
// retry another replica serves, nor a create still running.
func (d *Driver) SweepAbandoned(ctx context.Context, kind journal.Kind, olderThan time.Duration) (int, error) {
	var total int
	var errs []error
	for _, p := range d.seenPools() {
		n, err := d.journal(p.creds, p.pool).Sweep(ctx, kind, olderThan,
			func(ctx context.Context, rec journal.Record) error { return d.clean(ctx, p, kind, rec.ID) })
		total += n
		errs = append(errs, err)
		if kind == journal.KindVolume {
			d.reapHidden(ctx, p)
		}
	}
	return total, errors.Join(errs...)
}

// journal is the journal of pool with creds, with the driver's lease.
func (d *Driver) journal(creds Credentials, pool string) *OmapJournal {
	return NewOmapJournal(d.conns, creds, pool).WithLease(d.opts.CreateLease)
}

// holdLease keeps the lease of the create of name under id (in pool)
// while the create runs, renewing it every third of the lease. The
// returned stop ends that and, if check, renews once more: an error
// (Aborted) means the sweep took the reservation over, and what the create
// made must be undone rather than answered.
func (d *Driver) holdLease(ctx context.Context, creds Credentials, pool string, kind journal.Kind, name, id string) (stop func(check bool) error) {
	j := d.journal(creds, pool)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lost error
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(j.lease / 3)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
			}
			if err := j.Hold(context.WithoutCancel(ctx), kind, name, id); status.Code(err) == codes.Aborted {
				mu.Lock()
				lost = err
				mu.Unlock()
				return
			}
		}
	}()
	return func(check bool) error {
		close(quit)
		wg.Wait()
		if lost != nil {
			return lost
		}
		if !check {
			return nil
		}
		return j.Hold(context.WithoutCancel(ctx), kind, name, id)
	}
}

// clean removes what a create under id may have left.
func (d *Driver) clean(ctx context.Context, p seenPool, kind journal.Kind, id string) error {
	io, done, err := d.conns.IOContext(ctx, p.creds, p.pool, "")
	if err != nil {
		return err
	}
	defer done()
	switch kind {
	case journal.KindVolume:
		v, ok := parseVolumeID(id)
		if !ok {
			return nil
		}
		// A create that died between recording the size and its commit
		// left the record too.
		if err := d.forgetSize(ctx, p.creds, p.pool, v.image()); err != nil {
			return err
		}
		if err := rbd.RemoveImage(io, v.image()); err != nil && !errors.Is(err, rbd.ErrNotFound) {
			return backendError(err, "remove abandoned image")
		}
	case journal.KindSnapshot:
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

// reapHidden removes the hidden images (csi-del-…) of pool p whose
// snapshots and clones are all gone: DeleteSnapshot and DeleteVolume reap
// them as they go, and this catches any a failure or a crash left.
func (d *Driver) reapHidden(ctx context.Context, p seenPool) {
	io, done, err := d.conns.IOContext(ctx, p.creds, p.pool, "")
	if err != nil {
		return
	}
	defer done()
	names, err := rbd.GetImageNames(io)
	if err != nil {
		return
	}
	for _, n := range names {
		if strings.HasPrefix(n, deletedPrefix) && ctx.Err() == nil {
			d.reap(io, n)
		}
	}
}

package idempotency

import (
	"context"
	"log/slog"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/locks"
)

// flow describes how one kind of object goes through the journal.
type flow struct {
	kind  journal.Kind
	newID func(Options) func(string) string
	// id extracts the created object's ID from a successful response.
	id func(resp any) string
	// empty returns a new, empty response message to unmarshal into.
	empty func() proto.Message
	// replayable says whether a stored response may be returned without
	// calling the driver (false for snapshots not yet ready to use: the
	// CO polls CreateSnapshot until they are).
	replayable func(resp any) bool
}

var (
	volumeFlow = flow{
		kind:  journal.KindVolume,
		newID: func(o Options) func(string) string { return o.NewID },
		id: func(resp any) string {
			r, _ := resp.(*csi.CreateVolumeResponse)
			return r.GetVolume().GetVolumeId()
		},
		empty:      func() proto.Message { return &csi.CreateVolumeResponse{} },
		replayable: func(any) bool { return true },
	}
	snapshotFlow = flow{
		kind:  journal.KindSnapshot,
		newID: func(o Options) func(string) string { return o.NewSnapshotID },
		id: func(resp any) string {
			r, _ := resp.(*csi.CreateSnapshotResponse)
			return r.GetSnapshot().GetSnapshotId()
		},
		empty: func() proto.Message { return &csi.CreateSnapshotResponse{} },
		replayable: func(resp any) bool {
			r, _ := resp.(*csi.CreateSnapshotResponse)
			return r.GetSnapshot().GetReadyToUse()
		},
	}
	groupFlow = flow{
		kind:  journal.KindGroupSnapshot,
		newID: func(o Options) func(string) string { return o.NewSnapshotID },
		id: func(resp any) string {
			r, _ := resp.(*csi.CreateVolumeGroupSnapshotResponse)
			return r.GetGroupSnapshot().GetGroupSnapshotId()
		},
		empty: func() proto.Message { return &csi.CreateVolumeGroupSnapshotResponse{} },
		replayable: func(resp any) bool {
			r, _ := resp.(*csi.CreateVolumeGroupSnapshotResponse)
			return r.GetGroupSnapshot().GetReadyToUse()
		},
	}
)

// releasable are driver error codes after which a reservation this very
// call made (Record.Fresh) is dropped: the request itself was refused, so
// no backend object under the reserved ID can exist. A reservation from an
// earlier attempt stays whatever the retry answers: that attempt may have
// built the object (a backend then answers the retry AlreadyExists), and
// only the reservation lets a later retry adopt it or Sweep remove it.
// After any other error the reservation stays too, and the retry reuses
// the ID. NotFound counts as a refusal: from a create-like RPC the spec
// means by it that the content source (a snapshot or volume to copy, a
// group's member) does not exist, so nothing was made.
func releasable(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.OutOfRange, codes.AlreadyExists, codes.Unimplemented, codes.NotFound:
		return true
	}
	return false
}

// create reserves name → ID, locks the ID, replays a committed answer or
// calls the driver with the reserved ID, and commits a success.
func (i *Interceptor) create(ctx context.Context, set *locks.Set, req any, handler grpc.UnaryHandler, f flow, name string) (any, error) {
	fp, ok := i.opts.Fingerprint(req)
	if !ok || name == "" {
		return handler(ctx, req)
	}
	j := i.opts.Journal
	id := f.newID(i.opts)(name)
	if id == "" {
		return nil, status.Errorf(codes.Internal, "idempotency: NewID returned an empty %s ID for %q", f.kind, name)
	}
	rec, err := j.Reserve(ctx, journal.Reservation{Kind: f.kind, Name: name, Fingerprint: fp, ID: id})
	if err != nil {
		return nil, err
	}
	// Create and Delete of one volume exclude each other from here on.
	if err := set.Acquire(locks.Lock{Key: f.kind.IDKey(rec.ID), Mode: locks.Exclusive}); err != nil {
		return nil, err
	}
	if rec.Committed && rec.Response != nil {
		resp := f.empty()
		if err := proto.Unmarshal(rec.Response, resp); err != nil {
			i.opts.Logger.WarnContext(ctx, "stored response unreadable; calling the driver again",
				slog.String("kind", f.kind.String()), slog.String("id", rec.ID), slog.String("error", err.Error()))
		} else if f.replayable(resp) {
			return resp, nil
		}
	}
	resp, err := handler(journal.ContextWithReservation(ctx, rec), req)
	// The driver has acted: record the outcome even if the caller gave up.
	bg := context.WithoutCancel(ctx)
	if err != nil {
		if rec.Fresh && !rec.Committed && releasable(err) {
			if rerr := j.Release(bg, f.kind, rec.ID); rerr != nil {
				i.opts.Logger.WarnContext(ctx, "could not drop reservation", slog.String("id", rec.ID), slog.String("error", rerr.Error()))
			}
		}
		return resp, err
	}
	got := f.id(resp)
	if got == "" {
		return nil, status.Errorf(codes.Internal, "idempotency: driver's %s response for %q has no ID", f.kind, name)
	}
	if got != rec.ID {
		i.opts.Logger.WarnContext(ctx, "driver ignored the reserved ID; retries after a crash may create duplicates",
			slog.String("kind", f.kind.String()), slog.String("reserved", rec.ID), slog.String("returned", got))
	}
	m, _ := resp.(proto.Message)
	raw, err := proto.Marshal(m)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "idempotency: encode %s response: %v", f.kind, err)
	}
	if err := j.Commit(bg, f.kind, name, got, raw); err != nil {
		// Not durable: make the CO retry, which reuses the reservation.
		return nil, status.Errorf(codes.Unavailable, "idempotency: %s %q was created but could not be recorded (%v); retry", f.kind, got, err)
	}
	return resp, nil
}

// delete locks the name bound to id (so a retried create of that name
// cannot run alongside) and releases the reservation after a success.
func (i *Interceptor) delete(ctx context.Context, set *locks.Set, req any, handler grpc.UnaryHandler, f flow, id string) (any, error) {
	if id == "" {
		return handler(ctx, req)
	}
	j := i.opts.Journal
	rec, ok, err := j.LookupID(ctx, f.kind, id)
	if err != nil {
		return nil, err
	}
	if ok {
		if err := set.Acquire(locks.Lock{Key: f.kind.NameKey(rec.Name), Mode: locks.Exclusive}); err != nil {
			return nil, err
		}
	}
	resp, err := handler(ctx, req)
	if err != nil {
		return resp, err
	}
	if err := j.Release(context.WithoutCancel(ctx), f.kind, id); err != nil {
		return nil, status.Errorf(codes.Unavailable, "idempotency: %s %q was deleted but its name could not be released (%v); retry", f.kind, id, err)
	}
	return resp, nil
}

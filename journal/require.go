package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type reservedIDKey struct{}

// reserved is what a create call's context carries of its reservation.
type reserved struct {
	id    string
	fresh bool
}

// ReservedID returns the ID the journal reserved for the create call running
// in ctx. A driver that creates its backend object under this ID is
// idempotent across retries and crashes.
func ReservedID(ctx context.Context) (string, bool) {
	r, ok := ctx.Value(reservedIDKey{}).(reserved)
	return r.id, ok
}

// ReservedFresh reports whether the create call running in ctx made its
// reservation itself (Record.Fresh): no earlier attempt had the name, so
// none can have left a backend object under the ID — provided IDs are
// never reused, as with RandomID. A driver may then skip looking for an
// earlier attempt's leftovers. False when unknown.
func ReservedFresh(ctx context.Context) bool {
	r, _ := ctx.Value(reservedIDKey{}).(reserved)
	return r.fresh
}

// ContextWithReservedID returns ctx carrying id as ReservedID; for testing
// drivers without the interceptor.
func ContextWithReservedID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, reservedIDKey{}, reserved{id: id})
}

// ContextWithReservation returns ctx carrying rec's ID as ReservedID and
// rec.Fresh as ReservedFresh: what the idempotency interceptor passes to
// the driver's create call.
func ContextWithReservation(ctx context.Context, rec Record) context.Context {
	return context.WithValue(ctx, reservedIDKey{}, reserved{id: rec.ID, fresh: rec.Fresh})
}

// RequireReservedID is ReservedID for a driver that cannot work without the
// journal: it returns the reserved ID, or an Internal error saying the
// server was built without a journal (csikit.Options.Journal unset), a
// deployment mistake no retry can fix.
func RequireReservedID(ctx context.Context) (string, error) {
	if id, ok := ReservedID(ctx); ok && id != "" {
		return id, nil
	}
	return "", status.Error(codes.Internal, "no reserved ID for this create call: the server was built without a journal (set csikit.Options.Journal)")
}

// RandomID returns 32 random hex digits (128 bits), the default ID format:
// safe in URLs, paths and Kubernetes object names.
func RandomID(string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

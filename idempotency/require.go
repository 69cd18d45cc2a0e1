package idempotency

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

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

package logging

import (
	"context"
	"log/slog"
	"time"

	"github.com/csikit/csikit/csi/requestid"
	"github.com/csikit/csikit/internal/logctx"
)

// FromContext returns the logger of the call ctx belongs to: the logger
// UnaryServerInterceptor (or NewContext) was given, whose every record
// carries the call's request ID (requestid.LogKey) and gRPC method
// (KeyMethod), whatever context it is later logged with. A driver logs
// through it so its lines can be matched with the SDK's for the same call.
// Without a call in ctx it returns a logger that discards everything: the
// SDK never falls back to slog.Default.
//
// The attributes are added to each record, so after WithGroup they land
// inside the group, as with requestid.NewHandler.
func FromContext(ctx context.Context) *slog.Logger { return logctx.FromContext(ctx) }

// NewContext returns ctx carrying logger as the call's logger, for drivers
// that build their own interceptor chain; the request ID is read from ctx
// (csi/requestid) when a record is written. UnaryServerInterceptor does
// this for every call, adding the method. A nil logger returns ctx as is.
func NewContext(ctx context.Context, logger *slog.Logger) context.Context {
	if logger == nil {
		return ctx
	}
	return logctx.NewContext(ctx, logger.Handler(), "", requestid.FromContext, time.Time{})
}

// NewContextHandler wraps base so that every record logged with a call's
// context (logger.InfoContext(ctx, ...)) carries the call's request ID and
// method, unless it has them already. With a nil base, records logged with
// a call's context go to the call's logger and all others are dropped: a
// library that takes an optional *slog.Logger and wraps it this way logs
// through the server's logger during calls when it was given none.
func NewContextHandler(base slog.Handler) slog.Handler { return logctx.NewHandler(base) }

// Package logctx carries a call's logger in its context. It is the
// mechanism behind csi/logging.FromContext, kept free of gRPC so that
// mount/, block/, idempotency/ and metrics/ can log through it without
// importing the csi/ packages.
//
// A call's context carries a scope: the handler the server logs to, the
// gRPC method, a function that finds the request ID in a context
// (requestid.FromContext, evaluated only for records that are written),
// and the call's start time (Start).
// NewHandler wraps a package's own logger so that every record it logs with
// a call's context carries KeyRequestID and KeyMethod, and, when the
// package was given no logger, goes to the call's handler.
package logctx

import (
	"context"
	"log/slog"
	"time"
)

// Attribute keys a call's records carry; they equal requestid.LogKey and
// logging.KeyMethod (a test in csi/logging holds them together).
const (
	KeyRequestID = "request_id"
	KeyMethod    = "method"
)

type scopeKey struct{}

// scope is the context of one call. Value returns the *scope itself for
// scopeKey, so installing one costs a single allocation.
type scope struct {
	context.Context
	h      slog.Handler
	method string
	id     func(context.Context) (string, bool)
	start  time.Time
}

// Value implements context.Context.
func (s *scope) Value(key any) any {
	if key == (scopeKey{}) {
		return s
	}
	return s.Context.Value(key)
}

// attrs returns the attributes naming the call.
func (s *scope) attrs() []slog.Attr {
	out := make([]slog.Attr, 0, 2)
	if s.id != nil {
		if id, ok := s.id(s); ok {
			out = append(out, slog.String(KeyRequestID, id))
		}
	}
	if s.method != "" {
		out = append(out, slog.String(KeyMethod, s.method))
	}
	return out
}

// NewContext returns ctx carrying h as the call's handler; method (may be
// empty) and id (may be nil) name the call, start (may be zero) is when it
// started. A nil h returns ctx unchanged.
func NewContext(ctx context.Context, h slog.Handler, method string, id func(context.Context) (string, bool), start time.Time) context.Context {
	if h == nil {
		return ctx
	}
	return &scope{Context: ctx, h: h, method: method, id: id, start: start}
}

// Start returns when the call ctx belongs to started, as given to
// NewContext; zero without a call or a start. It lets idempotency's
// interceptor give a call's locks its start (Owner.Since) instead of
// reading the clock again.
func Start(ctx context.Context) time.Time {
	if s := scopeOf(ctx); s != nil {
		return s.start
	}
	return time.Time{}
}

func scopeOf(ctx context.Context) *scope {
	if ctx == nil {
		return nil
	}
	s, _ := ctx.Value(scopeKey{}).(*scope)
	return s
}

// FromContext returns a logger bound to the call ctx belongs to: its
// records go to the call's handler and carry the call's attributes,
// whatever context they are later logged with. Without a call in ctx it
// returns a logger that discards everything.
func FromContext(ctx context.Context) *slog.Logger {
	s := scopeOf(ctx)
	if s == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(&handler{next: s.h, bound: s})
}

// NewHandler returns a handler that adds the attributes of the call a
// record's context belongs to (unless the record has them already) and
// passes it to base. A nil base means the call's handler; records logged
// outside a call are then dropped.
func NewHandler(base slog.Handler) slog.Handler { return &handler{next: base} }

// handler sends records to next or, when next is nil, to the handler of
// the record's call with ops replayed on it.
type handler struct {
	next  slog.Handler
	ops   []func(slog.Handler) slog.Handler
	bound *scope // FromContext: this call, whatever the record's context
}

func (h *handler) scope(ctx context.Context) *scope {
	if h.bound != nil {
		return h.bound
	}
	return scopeOf(ctx)
}

// Enabled reports whether the record's destination handles level.
func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	if h.next != nil {
		return h.next.Enabled(ctx, level)
	}
	s := h.scope(ctx)
	return s != nil && s.h.Enabled(ctx, level)
}

// Handle adds the call's attributes and passes r on.
func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	s := h.scope(ctx)
	next := h.next
	if next == nil {
		if s == nil {
			return nil
		}
		next = s.h
		for _, op := range h.ops {
			next = op(next)
		}
	}
	if s != nil {
		var add []slog.Attr
		for _, a := range s.attrs() {
			if !hasAttr(r, a.Key) {
				add = append(add, a)
			}
		}
		if len(add) > 0 {
			r = r.Clone()
			r.AddAttrs(add...)
		}
	}
	return next.Handle(ctx, r)
}

func hasAttr(r slog.Record, key string) bool {
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}

// WithAttrs returns a handler whose records carry attrs.
func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return h.with(func(n slog.Handler) slog.Handler { return n.WithAttrs(attrs) })
}

// WithGroup returns a handler that qualifies later attributes with name.
func (h *handler) WithGroup(name string) slog.Handler {
	return h.with(func(n slog.Handler) slog.Handler { return n.WithGroup(name) })
}

func (h *handler) with(op func(slog.Handler) slog.Handler) slog.Handler {
	if h.next != nil {
		return &handler{next: op(h.next), bound: h.bound}
	}
	return &handler{ops: append(h.ops[:len(h.ops):len(h.ops)], op), bound: h.bound}
}

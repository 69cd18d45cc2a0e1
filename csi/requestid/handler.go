package requestid

import (
	"context"
	"log/slog"
)

// NewHandler returns a slog.Handler that adds the request ID of the record's
// context, under LogKey, to every record h handles, unless the record already
// has a top-level LogKey attribute. Records logged without a context (or
// with one that has no ID) pass through unchanged. Attributes added after
// WithGroup land inside that group, as with any slog attribute.
func NewHandler(h slog.Handler) slog.Handler { return &handler{next: h} }

type handler struct{ next slog.Handler }

// Enabled reports whether the wrapped handler handles level.
func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

// Handle adds the request ID and passes r on.
func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return h.next.Handle(ctx, r)
	}
	c, ok := ctx.Value(ctxKey{}).(*idContext)
	if !ok || hasAttr(r, LogKey) {
		return h.next.Handle(ctx, r)
	}
	r = r.Clone()
	r.AddAttrs(slog.String(LogKey, c.String()))
	return h.next.Handle(ctx, r)
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
	return &handler{next: h.next.WithAttrs(attrs)}
}

// WithGroup returns a handler that qualifies later attributes with name.
func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{next: h.next.WithGroup(name)}
}

// Package requestid gives every gRPC call an ID, carried in its context and
// added to log lines.
//
// The ID comes from the incoming metadata key MetadataKey ("x-request-id")
// when the client sent a usable one: 1 to MaxLen bytes of printable ASCII
// without spaces; its first value wins. Otherwise the interceptor generates
// one: a random per-interceptor prefix and a counter ("5f0c9a1e-42"), so IDs
// are unique within a process and, with overwhelming probability, across
// restarts, at the cost of an atomic add per call. Nothing is formatted until
// FromContext is called, which the logging interceptor does only for lines
// it writes.
//
// NewHandler wraps a slog.Handler so every record logged with such a context
// (logger.InfoContext(ctx, ...)) carries the ID under LogKey.
//
// The package keeps no global state; each UnaryServerInterceptor call makes
// an independent generator.
package requestid

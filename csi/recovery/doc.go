// Package recovery turns a panic in a gRPC handler into a codes.Internal
// error so the server keeps serving.
//
// Invariants:
//
//   - The caller gets codes.Internal with a fixed message naming the method
//     and, when the context has one, the request ID (see csi/requestid); it
//     never contains the panic value or anything from the request.
//   - The panic is logged once, at slog.LevelError, with the method, the
//     request ID, the panic value and the goroutine's stack. The panic value
//     is passed through secrets.Redact with the request, so secret values a
//     driver formatted into it are replaced; a proto.Message panic value is
//     logged stripped.
//   - Options.OnPanic (for metrics) runs after logging; a panic inside it is
//     recovered and logged too, never propagated.
//   - A successful call costs one deferred function; nothing is allocated.
//
// Place it inside the request ID and logging interceptors so the failure is
// logged and counted like any other Internal error, and outside everything
// else that may panic (validation, locks, the driver).
package recovery

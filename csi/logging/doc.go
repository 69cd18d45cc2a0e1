// Package logging logs gRPC calls through a *slog.Logger without ever
// writing a secret.
//
// UnaryServerInterceptor writes one line per finished call, "call finished",
// with the attributes method, request_id (when the context has one, see
// csi/requestid), code, duration and, for failures, error. Its level comes
// from Options.CodeToLevel (DefaultCodeToLevel: Debug for OK, Info for
// expected outcomes such as NotFound or Aborted, Warn for rejected or failed
// requests, Error for Internal, Unknown and DataLoss). When Debug is enabled
// it also writes "call started" with the request, and adds the response to
// the finished line. Options.Level replaces CodeToLevel with a choice by
// method and code.
//
// StreamServerInterceptor does the same for streaming calls: one "call
// finished" line per stream with the number of messages sent; at Debug a
// "call started" line with the first request received.
//
// The interceptor also makes the logger the call's logger: FromContext(ctx)
// returns it with the call's request ID and method on every record, so a
// driver's lines can be matched with the SDK's for the same call.
// NewContextHandler wraps a library's own (possibly nil) logger the same
// way; csikit's mount/ and idempotency/ packages do this with the logger
// their Options were given, and log through the call's logger when they
// were given none.
//
// Invariants:
//
//   - Requests and responses are logged only through secrets.LogValue:
//     every csi_secret field and secrets map is stripped, at any depth, and
//     only when the record is actually written.
//   - Error messages are passed through secrets.Redact with the request, so
//     a secret a driver formatted into its error does not reach the log, in
//     any escaped spelling (see csi/secrets). To also keep it from the
//     client, chain secrets.UnaryServerInterceptor right inside this one.
//   - Nothing is built for a line the handler will not write: the interceptor
//     asks Handler.Enabled first. A successful call with Debug disabled
//     allocates one small context (the call's logger for FromContext, 64
//     bytes); the request ID is formatted only when a record is written.
//   - Records are passed to the logger's Handler directly with no source
//     location (it would always point here); the library imports no logging
//     package beyond log/slog. klog and logr users wrap theirs with
//     logr.ToSlogHandler (see the examples).
package logging

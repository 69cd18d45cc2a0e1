package logging

import (
	"log/slog"

	"google.golang.org/grpc/codes"
)

// Options configures UnaryServerInterceptor and StreamServerInterceptor. The zero value uses
// DefaultCodeToLevel.
type Options struct {
	// CodeToLevel picks the level of a call's "call finished" line from its
	// status code. Nil means DefaultCodeToLevel.
	CodeToLevel func(codes.Code) slog.Level
	// Level, when set, picks the level of the "call finished" line from the
	// call's full method name and status code, and CodeToLevel is not used.
	// csikit.Server uses it to log polling RPCs at Debug and mutating ones
	// at Info.
	Level func(fullMethod string, c codes.Code) slog.Level
	// FullMethod, when set, names the one gRPC method the interceptor is
	// made for, as by a server that builds a chain per RPC (csikit.Server
	// does): the method attribute of its calls' lines is then added to
	// the logger's handler once (slog.Handler.WithAttrs), so a handler
	// that pre-formats such attributes does not format it per call. The
	// lines read the same. Calls of any other method are logged as
	// without it.
	FullMethod string
}

// DefaultCodeToLevel is the level of a call's line by status code:
//
//	Debug  OK
//	Info   Canceled, NotFound, AlreadyExists, Aborted, Unimplemented
//	       (outcomes a CO routinely causes and handles)
//	Warn   InvalidArgument, DeadlineExceeded, PermissionDenied,
//	       ResourceExhausted, FailedPrecondition, OutOfRange, Unavailable,
//	       Unauthenticated
//	Error  Unknown, Internal, DataLoss and any other code
func DefaultCodeToLevel(c codes.Code) slog.Level {
	switch c {
	case codes.OK:
		return slog.LevelDebug
	case codes.Canceled, codes.NotFound, codes.AlreadyExists, codes.Aborted, codes.Unimplemented:
		return slog.LevelInfo
	case codes.InvalidArgument, codes.DeadlineExceeded, codes.PermissionDenied, codes.ResourceExhausted,
		codes.FailedPrecondition, codes.OutOfRange, codes.Unavailable, codes.Unauthenticated:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

package recovery

import (
	"google.golang.org/grpc"

	"github.com/csikit/csikit/internal/grpcstream"
)

// StreamServerInterceptor is the stream variant of UnaryServerInterceptor:
// a panic in the rest of the chain or the handler becomes codes.Internal,
// logged once with its stack and the request ID of the stream's context,
// and passed to Options.OnPanic. The panic value is redacted against the
// first request the handler received.
func StreamServerInterceptor(opts Options) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		rs, first := grpcstream.CaptureFirst(ss)
		defer func() {
			if r := recover(); r != nil {
				err = handlePanic(ss.Context(), opts, info.FullMethod, first.Get(), r)
			}
		}()
		return handler(srv, rs)
	}
}

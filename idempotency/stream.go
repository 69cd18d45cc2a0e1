package idempotency

import (
	"log/slog"

	"google.golang.org/grpc"

	"github.com/csikit/csikit/internal/grpcstream"
	"github.com/csikit/csikit/locks"
)

// StreamServerInterceptor returns the stream variant of the interceptor:
// every request message the handler receives takes the locks its RPC's key
// function names (Aborted from RecvMsg, naming the holder, on a conflict),
// and all are released when the handler returns, panics included. The
// journal does not apply to streaming RPCs. Install it after validation.
func (i *Interceptor) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		kf := i.keys[info.FullMethod]
		if kf == nil {
			return handler(srv, ss)
		}
		// Only the handler's goroutine receives, so the set needs no mutex.
		set := locks.Set{Table: i.opts.Locks, Owner: locks.Owner{Method: info.FullMethod, Since: callStart(ss.Context())}}
		defer set.Release()
		return handler(srv, &grpcstream.Stream{ServerStream: ss, OnRecv: func(m any) error {
			ctx := ss.Context()
			if err := set.Acquire(kf(ctx, m)...); err != nil {
				i.opts.Logger.DebugContext(ctx, "lock conflict", slog.String("method", info.FullMethod), slog.String("conflict", err.Error()))
				return err
			}
			return nil
		}})
	}
}

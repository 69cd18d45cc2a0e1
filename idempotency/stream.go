package idempotency

import (
	"log/slog"

	"google.golang.org/grpc"

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
		ls := &lockingStream{ServerStream: ss, i: i, kf: kf, method: info.FullMethod,
			set: locks.Set{Table: i.opts.Locks, Owner: locks.Owner{Method: info.FullMethod, Since: callStart(ss.Context())}}}
		defer ls.set.Release()
		return handler(srv, ls)
	}
}

// lockingStream takes each received message's locks. Only the handler's
// goroutine receives, so the lock set needs no mutex.
type lockingStream struct {
	grpc.ServerStream
	i      *Interceptor
	kf     locks.KeyFunc
	method string
	set    locks.Set
}

func (s *lockingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	ctx := s.Context()
	if err := s.set.Acquire(s.kf(ctx, m)...); err != nil {
		s.i.opts.Logger.DebugContext(ctx, "lock conflict", slog.String("method", s.method), slog.String("conflict", err.Error()))
		return err
	}
	return nil
}

package recovery

import (
	"google.golang.org/grpc"
)

// StreamServerInterceptor is the stream variant of UnaryServerInterceptor:
// a panic in the rest of the chain or the handler becomes codes.Internal,
// logged once with its stack and the request ID of the stream's context,
// and passed to Options.OnPanic. The panic value is redacted against the
// first request the handler received.
func StreamServerInterceptor(opts Options) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		rs := &firstRecv{ServerStream: ss}
		defer func() {
			if r := recover(); r != nil {
				err = handlePanic(ss.Context(), opts, info.FullMethod, rs.first, r)
			}
		}()
		return handler(srv, rs)
	}
}

// firstRecv remembers the first message the handler received.
type firstRecv struct {
	grpc.ServerStream
	first any
}

func (s *firstRecv) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil && s.first == nil {
		s.first = m
	}
	return err
}

package requestid

import (
	"context"

	"google.golang.org/grpc"
)

// StreamServerInterceptor is the stream variant of UnaryServerInterceptor:
// the stream's context (ServerStream.Context) carries the request ID.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	g := newGenerator()
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &idStream{ServerStream: ss, ctx: g.context(ss.Context())})
	}
}

// idStream is a ServerStream with the request ID's context.
type idStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *idStream) Context() context.Context { return s.ctx }

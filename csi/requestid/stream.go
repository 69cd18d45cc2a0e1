package requestid

import (
	"google.golang.org/grpc"

	"github.com/csikit/csikit/internal/grpcstream"
)

// StreamServerInterceptor is the stream variant of UnaryServerInterceptor:
// the stream's context (ServerStream.Context) carries the request ID.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	g := newGenerator()
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, grpcstream.WithContext(ss, g.context(ss.Context())))
	}
}

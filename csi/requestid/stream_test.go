package requestid_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/csikit/csikit/csi/requestid"
)

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

// TestStreamInterceptor: the handler's stream context carries the
// incoming ID, or a generated one.
func TestStreamInterceptor(t *testing.T) {
	ic := requestid.StreamServerInterceptor()
	for _, tc := range []struct{ in, want string }{{"req-7", "req-7"}, {"", ""}} {
		ctx := context.Background()
		if tc.in != "" {
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(requestid.MetadataKey, tc.in))
		}
		var got string
		var ok bool
		err := ic(nil, ctxStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: "/x/Y"}, func(_ any, ss grpc.ServerStream) error {
			got, ok = requestid.FromContext(ss.Context())
			return nil
		})
		if err != nil || !ok || got == "" || (tc.want != "" && got != tc.want) {
			t.Errorf("incoming %q: ID %q (%v), err %v; want %q or a generated one", tc.in, got, ok, err, tc.want)
		}
	}
}

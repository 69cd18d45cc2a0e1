package requestid_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/requestid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
)

type printID struct {
	csi.UnimplementedIdentityServer
}

func (printID) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	id, _ := requestid.FromContext(ctx)
	fmt.Println("request", id)
	return &csi.ProbeResponse{}, nil
}

func ExampleUnaryServerInterceptor() {
	l := bufconn.Listen(1 << 16)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(requestid.UnaryServerInterceptor()))
	csi.RegisterIdentityServer(srv, printID{})
	go srv.Serve(l)
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	// A client that has an ID sends it; otherwise the server makes one up.
	ctx := metadata.AppendToOutgoingContext(context.Background(), requestid.MetadataKey, "trace-42")
	if _, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}); err != nil {
		log.Fatal(err)
	}
	// Output:
	// request trace-42
}

func ExampleNewHandler() {
	logger := slog.New(requestid.NewHandler(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})))
	ctx := requestid.NewContext(context.Background(), "trace-42")
	logger.InfoContext(ctx, "staging volume", "volume_id", "vol-1")
	// Output:
	// level=INFO msg="staging volume" volume_id=vol-1 request_id=trace-42
}

func ExampleFromContext() {
	ctx := requestid.NewContext(context.Background(), "trace-42")
	id, ok := requestid.FromContext(ctx)
	fmt.Println(id, ok)
	_, ok = requestid.FromContext(context.Background())
	fmt.Println(ok)
	// Output:
	// trace-42 true
	// false
}

// idStream is the stream a handler gets; only its context is used here.
type idStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s idStream) Context() context.Context { return s.ctx }

func ExampleStreamServerInterceptor() {
	interceptor := requestid.StreamServerInterceptor()
	// On a server: grpc.NewServer(grpc.ChainStreamInterceptor(interceptor, ...)).
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(requestid.MetadataKey, "backup-run-17"))
	_ = interceptor(nil, idStream{ctx: ctx}, &grpc.StreamServerInfo{}, func(_ any, ss grpc.ServerStream) error {
		id, _ := requestid.FromContext(ss.Context())
		fmt.Println(id)
		return nil
	})
	// Output: backup-run-17
}

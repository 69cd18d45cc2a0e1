package recovery_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/recovery"
	"github.com/csikit/csikit/csi/requestid"
	grpcrecovery "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/csikit/csikit/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const secret = "hunter2-very-secret"

// node panics in NodeStageVolume with whatever panicWith returns.
type node struct {
	csi.UnimplementedNodeServer
	panicWith func(*csi.NodeStageVolumeRequest) any
}

func (n *node) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if n.panicWith != nil {
		panic(n.panicWith(req))
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: "node-1"}, nil
}

type listenFunc func(t *testing.T) (net.Listener, string, []grpc.DialOption)

var transports = map[string]listenFunc{
	"unix": func(t *testing.T) (net.Listener, string, []grpc.DialOption) {
		dir, err := os.MkdirTemp("", "rec")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		path := filepath.Join(dir, "csi.sock")
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		return l, "unix://" + path, nil
	},
	"bufconn": func(t *testing.T) (net.Listener, string, []grpc.DialOption) {
		l := bufconn.Listen(1 << 16)
		return l, "passthrough:///bufconn", []grpc.DialOption{grpc.WithContextDialer(
			func(ctx context.Context, _ string) (net.Conn, error) { return l.DialContext(ctx) })}
	},
}

func start(t *testing.T, listen listenFunc, n *node, interceptors ...grpc.UnaryServerInterceptor) csi.NodeClient {
	t.Helper()
	l, target, dialOpts := listen(t)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(interceptors...))
	csi.RegisterNodeServer(srv, n)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	conn, err := grpc.NewClient(target, append(dialOpts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop(); <-done })
	return csi.NewNodeClient(conn)
}

func stageRequest() *csi.NodeStageVolumeRequest {
	return &csi.NodeStageVolumeRequest{
		VolumeId:          "vol-from-request",
		StagingTargetPath: "/staging/path-from-request",
		Secrets:           map[string]string{"password": secret},
	}
}

func TestPanicBecomesInternalAndServerKeepsServing(t *testing.T) {
	for name, listen := range transports {
		t.Run(name, func(t *testing.T) {
			var logs testenv.SyncBuffer
			var (
				mu      sync.Mutex
				methods []string
			)
			n := &node{panicWith: func(req *csi.NodeStageVolumeRequest) any {
				return fmt.Sprintf("boom: cannot stage %v", req) // a careless driver
			}}
			client := start(t, listen, n, recovery.UnaryServerInterceptor(recovery.Options{
				Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				OnPanic: func(_ context.Context, method string, r any) {
					mu.Lock()
					defer mu.Unlock()
					methods = append(methods, method)
				},
			}))

			_, err := client.NodeStageVolume(t.Context(), stageRequest())
			st, _ := status.FromError(err)
			if st.Code() != codes.Internal {
				t.Fatalf("panicking call: got %v, want Internal", err)
			}
			for _, leak := range []string{secret, "vol-from-request", "path-from-request", "boom"} {
				if strings.Contains(st.Message(), leak) {
					t.Errorf("status message %q leaks %q", st.Message(), leak)
				}
			}
			if !strings.Contains(st.Message(), "/csi.v1.Node/NodeStageVolume") {
				t.Errorf("status message %q does not name the method", st.Message())
			}

			// The server is still up, for other RPCs and the same one.
			if _, err := client.NodeGetInfo(t.Context(), &csi.NodeGetInfoRequest{}); err != nil {
				t.Errorf("NodeGetInfo after a panic: %v", err)
			}
			n.panicWith = nil
			if _, err := client.NodeStageVolume(t.Context(), stageRequest()); err != nil {
				t.Errorf("NodeStageVolume after a panic: %v", err)
			}

			out := logs.String()
			if c := strings.Count(out, `"msg":"panic recovered"`); c != 1 {
				t.Errorf("panic log records: got %d, want 1:\n%s", c, out)
			}
			if c := strings.Count(out, "[running]"); c != 1 {
				t.Errorf("stacks in the log: got %d, want 1", c)
			}
			if !strings.Contains(out, "recovery_test.TestPanicBecomesInternalAndServerKeepsServing") {
				t.Errorf("logged stack does not reach the panicking function:\n%s", out)
			}
			if !strings.Contains(out, "boom: cannot stage") || !strings.Contains(out, "vol-from-request") {
				t.Errorf("log lacks the panic value:\n%s", out)
			}
			if strings.Contains(out, secret) {
				t.Errorf("log contains the secret:\n%s", out)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(methods) != 1 || methods[0] != "/csi.v1.Node/NodeStageVolume" {
				t.Errorf("OnPanic calls: got %v, want one for NodeStageVolume", methods)
			}
		})
	}
}

func TestPanicMessageCarriesRequestID(t *testing.T) {
	var logs testenv.SyncBuffer
	n := &node{panicWith: func(*csi.NodeStageVolumeRequest) any { return "boom" }}
	client := start(t, transports["unix"], n,
		requestid.UnaryServerInterceptor(),
		recovery.UnaryServerInterceptor(recovery.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	ctx := metadata.AppendToOutgoingContext(t.Context(), requestid.MetadataKey, "trace-99")
	_, err := client.NodeStageVolume(ctx, stageRequest())
	if s := status.Convert(err); s.Code() != codes.Internal || !strings.Contains(s.Message(), "trace-99") {
		t.Errorf("got %v, want Internal naming request trace-99", err)
	}
	if !strings.Contains(logs.String(), "request_id=trace-99") {
		t.Errorf("log line lacks the request ID:\n%s", logs.String())
	}
}

func TestPanicValues(t *testing.T) {
	for name, tc := range map[string]struct {
		value   func(*csi.NodeStageVolumeRequest) any
		wantLog string
	}{
		"nil":           {func(*csi.NodeStageVolumeRequest) any { return nil }, "panic called with nil"},
		"error":         {func(*csi.NodeStageVolumeRequest) any { return fmt.Errorf("wrapped %s", secret) }, "wrapped ***stripped***"},
		"proto message": {func(r *csi.NodeStageVolumeRequest) any { return r }, "vol-from-request"},
		"runtime error": {func(r *csi.NodeStageVolumeRequest) any {
			var s []int
			return s[len(r.GetVolumeId())] // panics itself, before returning
		}, "index out of range"},
	} {
		t.Run(name, func(t *testing.T) {
			var logs testenv.SyncBuffer
			client := start(t, transports["bufconn"], &node{panicWith: tc.value},
				recovery.UnaryServerInterceptor(recovery.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}))
			_, err := client.NodeStageVolume(t.Context(), stageRequest())
			if status.Code(err) != codes.Internal {
				t.Errorf("got %v, want Internal", err)
			}
			if out := logs.String(); !strings.Contains(out, tc.wantLog) || strings.Contains(out, secret) {
				t.Errorf("log: want %q and no secret, got:\n%s", tc.wantLog, out)
			}
		})
	}
}

func TestNilLoggerAndPanickingOnPanic(t *testing.T) {
	n := &node{panicWith: func(*csi.NodeStageVolumeRequest) any { return "boom" }}
	var logs testenv.SyncBuffer
	for _, opts := range []recovery.Options{
		{},
		{OnPanic: func(context.Context, string, any) { panic("metrics broke") }},
		{OnPanic: func(context.Context, string, any) { panic("metrics broke") }, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
	} {
		client := start(t, transports["bufconn"], n, recovery.UnaryServerInterceptor(opts))
		if _, err := client.NodeStageVolume(t.Context(), stageRequest()); status.Code(err) != codes.Internal {
			t.Errorf("got %v, want Internal", err)
		}
		if _, err := client.NodeGetInfo(t.Context(), &csi.NodeGetInfoRequest{}); err != nil {
			t.Errorf("next call: %v", err)
		}
	}
	if !strings.Contains(logs.String(), "panic in recovery.Options.OnPanic") {
		t.Errorf("a panicking OnPanic was not logged:\n%s", logs.String())
	}
}

func TestNoPanicPassesThrough(t *testing.T) {
	i := recovery.UnaryServerInterceptor(recovery.Options{})
	want := status.Error(codes.NotFound, "volume vol-1 not found")
	resp, err := i(context.Background(), nil, &grpc.UnaryServerInfo{}, func(context.Context, any) (any, error) {
		return "resp", want
	})
	if resp != "resp" || err != want {
		t.Errorf("got %v, %v; want resp, %v", resp, err, want)
	}
}

// RecoveryHandler plugs into go-grpc-middleware's recovery interceptor:
// the panic becomes Internal, is logged once with its stack and method,
// OnPanic runs, and the panic value (which may hold request data) is not
// logged.
func TestRecoveryHandlerWithGoGRPCMiddleware(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	var panics []string
	var mu sync.Mutex
	h := recovery.RecoveryHandler(recovery.Options{
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		OnPanic: func(_ context.Context, method string, _ any) {
			mu.Lock()
			panics = append(panics, method)
			mu.Unlock()
		},
	})
	c := start(t, transports["unix"], &node{panicWith: func(r *csi.NodeStageVolumeRequest) any { return "bad " + r.Secrets["password"] }},
		grpcrecovery.UnaryServerInterceptor(grpcrecovery.WithRecoveryHandlerContext(h)))
	_, err := c.NodeStageVolume(context.Background(), stageRequest())
	if status.Code(err) != codes.Internal {
		t.Fatalf("got %v, want Internal", err)
	}
	if _, err := c.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{}); err != nil {
		t.Fatalf("call after the panic: %v", err)
	}
	out := logs.String()
	if strings.Contains(out, secret) || strings.Contains(err.Error(), secret) {
		t.Errorf("secret leaked: log %q, error %v", out, err)
	}
	if strings.Count(out, "panic recovered") != 1 || !strings.Contains(out, "NodeStageVolume") || !strings.Contains(out, "goroutine") {
		t.Errorf("want one panic line with method and stack, got %s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(panics) != 1 || panics[0] != csi.Node_NodeStageVolume_FullMethodName {
		t.Errorf("OnPanic calls: got %v, want one for NodeStageVolume", panics)
	}
}

package csikit_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/internal/testenv"
)

// panickyDesc is a server-streaming service a driver registers through
// GRPCServer: Boom panics once it has received its request, Echo sends the
// request back twice.
var panickyDesc = grpc.ServiceDesc{
	ServiceName: "test.Panicky",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "Boom", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			var req wrapperspb.StringValue
			if err := ss.RecvMsg(&req); err != nil {
				return err
			}
			panic("streaming bug with " + req.GetValue())
		}},
		{StreamName: "Echo", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			var req wrapperspb.StringValue
			if err := ss.RecvMsg(&req); err != nil {
				return err
			}
			for range 2 {
				if err := ss.SendMsg(&req); err != nil {
					return err
				}
			}
			return nil
		}},
	},
}

// serveWith is serve with a hook that registers more services before the
// server starts.
func serveWith(t *testing.T, driver any, opts csikit.Options, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	opts.Name, opts.Version = "stream.csikit.dev", "v1"
	srv, err := csikit.NewServer(driver, opts)
	if err != nil {
		t.Fatal(err)
	}
	register(srv.GRPCServer())
	sock := filepath.Join(shortTempDir(t), "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ListenAndServe(ctx, "unix://"+sock) }()
	waitForSocket(t, sock)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return conn
}

// callStream opens method, sends v and reads until the stream ends.
func callStream(ctx context.Context, conn *grpc.ClientConn, method, v string) (n int, err error) {
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return 0, err
	}
	if err := cs.SendMsg(wrapperspb.String(v)); err != nil {
		return 0, err
	}
	if err := cs.CloseSend(); err != nil {
		return 0, err
	}
	for {
		var out wrapperspb.StringValue
		if err := cs.RecvMsg(&out); err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
		n++
	}
}

// TestStreamPanicRecoveredLoggedCounted: a panic in a streaming handler
// registered through GRPCServer is answered Internal, logged once with the
// call's request ID, counted, and the server keeps serving; every
// streaming call gets a "call finished" line and an operations sample, and
// Options.StreamInterceptors run.
func TestStreamPanicRecoveredLoggedCounted(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	reg := prometheus.NewPedanticRegistry()
	var userSaw []string
	userIC := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		userSaw = append(userSaw, info.FullMethod)
		return h(srv, ss)
	}
	conn := serveWith(t, &ctrlDriver{}, csikit.Options{Logger: debugLogger(logs), Registry: reg,
		StreamInterceptors: []grpc.StreamServerInterceptor{userIC}},
		func(g *grpc.Server) { g.RegisterService(&panickyDesc, struct{}{}) })

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-request-id", "req-stream-42")
	_, err := callStream(ctx, conn, "/test.Panicky/Boom", "payload")
	if status.Code(err) != codes.Internal {
		t.Fatalf("Boom: %v, want Internal", err)
	}
	if !strings.Contains(status.Convert(err).Message(), "req-stream-42") {
		t.Errorf("Internal message %q does not name the request ID", status.Convert(err).Message())
	}
	if n, err := callStream(context.Background(), conn, "/test.Panicky/Echo", "hi"); err != nil || n != 2 {
		t.Fatalf("Echo after the panic: %d messages, %v; want 2, nil", n, err)
	}

	out := logs.String()
	var panicLines []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"msg":"panic recovered"`) {
			panicLines = append(panicLines, line)
		}
	}
	if len(panicLines) != 1 {
		t.Fatalf("panic lines: %d, want 1:\n%s", len(panicLines), out)
	}
	if !strings.Contains(panicLines[0], `"request_id":"req-stream-42"`) || !strings.Contains(panicLines[0], `"method":"/test.Panicky/Boom"`) {
		t.Errorf("panic line lacks request ID or method: %s", panicLines[0])
	}
	if !strings.Contains(out, `"msg":"call finished","method":"/test.Panicky/Boom","request_id":"req-stream-42","code":"Internal"`) {
		t.Errorf("no Internal call line for Boom:\n%s", out)
	}
	if !strings.Contains(out, `"method":"/test.Panicky/Echo"`) || !strings.Contains(out, `"sent":2`) {
		t.Errorf("no call line with sent=2 for Echo:\n%s", out)
	}

	want := `
# HELP csi_plugin_panics_recovered_total Panics recovered in CSI request handlers, by gRPC method.
# TYPE csi_plugin_panics_recovered_total counter
csi_plugin_panics_recovered_total{driver_name="stream.csikit.dev",method_name="/test.Panicky/Boom"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "csi_plugin_panics_recovered_total"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	samples := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "csi_plugin_operations_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var method, code string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "method_name":
					method = l.GetValue()
				case "grpc_status_code":
					code = l.GetValue()
				}
			}
			samples[method+" "+code] += m.GetHistogram().GetSampleCount()
		}
	}
	if samples["/test.Panicky/Boom Internal"] != 1 || samples["/test.Panicky/Echo OK"] != 1 {
		t.Errorf("operations samples %v, want Boom Internal 1 and Echo OK 1", samples)
	}
	if len(userSaw) != 2 {
		t.Errorf("Options.StreamInterceptors saw %v, want both calls", userSaw)
	}
}

// TestLogLevels: with a logger at Info, a successful mutating call logs and
// a successful polling call does not; Options.LogLevel overrides.
func TestLogLevels(t *testing.T) {
	for _, tc := range []struct {
		name            string
		level           func(string, codes.Code) slog.Level
		wantProbe, want bool
	}{
		{name: "default", wantProbe: false, want: true},
		{name: "custom", level: func(string, codes.Code) slog.Level { return slog.LevelWarn }, wantProbe: true, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testenv.SyncBuffer{}
			s := serve(t, &ctrlDriver{}, csikit.Options{LogLevel: tc.level,
				Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
			if _, err := s.identity().Probe(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := s.controller().CreateVolume(context.Background(), newCreate("lvl")); err != nil {
				t.Fatal(err)
			}
			out := logs.String()
			if got := strings.Contains(out, "/csi.v1.Identity/Probe"); got != tc.wantProbe {
				t.Errorf("Probe logged %v, want %v:\n%s", got, tc.wantProbe, out)
			}
			if got := strings.Contains(out, "/csi.v1.Controller/CreateVolume"); got != tc.want {
				t.Errorf("CreateVolume logged %v, want %v:\n%s", got, tc.want, out)
			}
		})
	}
	for m, want := range map[string]slog.Level{
		"/csi.v1.Identity/Probe":                       slog.LevelDebug,
		"/csi.v1.Identity/GetPluginInfo":               slog.LevelDebug,
		"/csi.v1.Controller/ControllerGetCapabilities": slog.LevelDebug,
		"/csi.v1.Node/NodeGetInfo":                     slog.LevelDebug,
		"/csi.v1.Node/NodeGetVolumeStats":              slog.LevelDebug,
		"/csi.v1.Node/NodeGetCapabilities":             slog.LevelDebug,
		"/csi.v1.Controller/CreateVolume":              slog.LevelInfo,
		"/csi.v1.Node/NodePublishVolume":               slog.LevelInfo,
		"/csi.v1.Controller/DeleteSnapshot":            slog.LevelInfo,
	} {
		if got := csikit.DefaultLogLevel(m, codes.OK); got != want {
			t.Errorf("DefaultLogLevel(%s, OK) = %v, want %v", m, got, want)
		}
	}
	if got := csikit.DefaultLogLevel("/csi.v1.Identity/Probe", codes.Internal); got != slog.LevelError {
		t.Errorf("DefaultLogLevel(Probe, Internal) = %v, want ERROR", got)
	}
}

// TestOtherUnaryServicesAndServerOptions: a unary service registered
// through GRPCServer runs csikit's chain too (a panic is Internal and
// logged with its request ID); interceptors given in Options.ServerOptions
// run for CSI RPCs and those services alike, and Options.UnaryInterceptors
// see the CSI RPCs after csikit's chain.
func TestOtherUnaryServicesAndServerOptions(t *testing.T) {
	logs := &testenv.SyncBuffer{}
	var grpcLevel, csikitLevel []string
	var mu sync.Mutex
	record := func(to *[]string) grpc.UnaryServerInterceptor {
		return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			mu.Lock()
			*to = append(*to, info.FullMethod)
			mu.Unlock()
			return h(ctx, req)
		}
	}
	desc := grpc.ServiceDesc{
		ServiceName: "test.Unary",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Boom", Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			var req wrapperspb.StringValue
			if err := dec(&req); err != nil {
				return nil, err
			}
			h := func(context.Context, any) (any, error) { panic("unary bug") }
			if ic == nil {
				return h(ctx, &req)
			}
			return ic(ctx, &req, &grpc.UnaryServerInfo{FullMethod: "/test.Unary/Boom"}, h)
		}}},
	}
	conn := serveWith(t, &ctrlDriver{}, csikit.Options{Logger: debugLogger(logs),
		ServerOptions:     []grpc.ServerOption{grpc.ChainUnaryInterceptor(record(&grpcLevel))},
		UnaryInterceptors: []grpc.UnaryServerInterceptor{record(&csikitLevel)}},
		func(g *grpc.Server) { g.RegisterService(&desc, struct{}{}) })

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-request-id", "req-unary-7")
	var out wrapperspb.StringValue
	err := conn.Invoke(ctx, "/test.Unary/Boom", wrapperspb.String("x"), &out)
	if status.Code(err) != codes.Internal {
		t.Fatalf("Boom: %v, want Internal", err)
	}
	if _, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}); err != nil {
		t.Fatal(err)
	}
	logged := logs.String()
	if !strings.Contains(logged, `"msg":"panic recovered","method":"/test.Unary/Boom","request_id":"req-unary-7"`) {
		t.Errorf("panic in a GRPCServer-registered unary service not logged with its request ID:\n%s", logged)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(grpcLevel) != 2 || grpcLevel[1] != csi.Identity_Probe_FullMethodName {
		t.Errorf("ServerOptions interceptor saw %v, want Boom and Probe", grpcLevel)
	}
	if len(csikitLevel) != 2 || csikitLevel[1] != csi.Identity_Probe_FullMethodName {
		t.Errorf("Options.UnaryInterceptors saw %v, want Boom and Probe", csikitLevel)
	}
}

package logging_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/logging"
	"github.com/csikit/csikit/csi/recovery"
	"github.com/csikit/csikit/csi/requestid"
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

// driver is a small Identity+Controller+Node plugin with scripted outcomes.
type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
}

func (driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

func (driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "fail" {
		// A careless driver: its error message quotes a secret.
		return nil, status.Errorf(codes.ResourceExhausted, "pool full for user with key %s", req.GetSecrets()["key"])
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-" + req.GetName(), CapacityBytes: 1 << 30}}, nil
}

func (driver) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if req.GetVolumeId() == "panic" {
		panic(fmt.Sprintf("cannot stage %v", req))
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// logLines parses buf's JSON log lines.
func logLines(t *testing.T, buf *testenv.SyncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, l)
		}
		out = append(out, m)
	}
	return out
}

type clients struct {
	id   csi.IdentityClient
	ctrl csi.ControllerClient
	node csi.NodeClient
}

// start serves driver{} behind requestid, logging and recovery (the order
// csikit uses) on a real unix socket, or on bufconn.
func start(t *testing.T, useBufconn bool, logger *slog.Logger, opts logging.Options) clients {
	t.Helper()
	var (
		l        net.Listener
		target   string
		dialOpts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	)
	if useBufconn {
		bl := bufconn.Listen(1 << 16)
		l, target = bl, "passthrough:///bufconn"
		dialOpts = append(dialOpts, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return bl.DialContext(ctx)
		}))
	} else {
		dir, err := os.MkdirTemp("", "log")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		path := filepath.Join(dir, "csi.sock")
		if l, err = net.Listen("unix", path); err != nil {
			t.Fatal(err)
		}
		target = "unix://" + path
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(
		requestid.UnaryServerInterceptor(),
		logging.UnaryServerInterceptor(logger, opts),
		recovery.UnaryServerInterceptor(recovery.Options{Logger: logger}),
	))
	csi.RegisterIdentityServer(srv, driver{})
	csi.RegisterControllerServer(srv, driver{})
	csi.RegisterNodeServer(srv, driver{})
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	conn, err := grpc.NewClient(target, dialOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop(); <-done })
	return clients{csi.NewIdentityClient(conn), csi.NewControllerClient(conn), csi.NewNodeClient(conn)}
}

// exercise makes one call of each kind: success with secrets, error quoting
// a secret, panic quoting a secret, and a Probe with a client request ID.
func exercise(t *testing.T, c clients) {
	t.Helper()
	sec := map[string]string{"key": secret}
	if _, err := c.node.NodeStageVolume(t.Context(), &csi.NodeStageVolumeRequest{
		VolumeId: "vol-1", StagingTargetPath: "/staging", Secrets: sec}); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}
	if _, err := c.ctrl.CreateVolume(t.Context(), &csi.CreateVolumeRequest{Name: "pvc-1", Secrets: sec}); err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	if _, err := c.ctrl.CreateVolume(t.Context(), &csi.CreateVolumeRequest{Name: "fail", Secrets: sec}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("CreateVolume(fail): got %v, want ResourceExhausted", err)
	}
	if _, err := c.node.NodeStageVolume(t.Context(), &csi.NodeStageVolumeRequest{
		VolumeId: "panic", StagingTargetPath: "/staging", Secrets: sec}); status.Code(err) != codes.Internal {
		t.Fatalf("NodeStageVolume(panic): got %v, want Internal", err)
	}
	ctx := metadata.AppendToOutgoingContext(t.Context(), requestid.MetadataKey, "trace-1")
	if _, err := c.id.Probe(ctx, &csi.ProbeRequest{}); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if _, err := c.node.NodeGetInfo(t.Context(), &csi.NodeGetInfoRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("NodeGetInfo: got %v, want Unimplemented", err)
	}
}

func TestNoSecretAtDebug(t *testing.T) {
	for _, useBufconn := range []bool{false, true} {
		for name, newHandler := range map[string]func(*testenv.SyncBuffer) slog.Handler{
			"json": func(b *testenv.SyncBuffer) slog.Handler {
				return slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug - 4, AddSource: true})
			},
			"text": func(b *testenv.SyncBuffer) slog.Handler {
				return slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug - 4, AddSource: true})
			},
		} {
			t.Run(fmt.Sprintf("%s/bufconn=%v", name, useBufconn), func(t *testing.T) {
				var buf testenv.SyncBuffer
				exercise(t, start(t, useBufconn, slog.New(newHandler(&buf)), logging.Options{}))
				out := buf.String()
				if strings.Contains(out, secret) || strings.Contains(out, "hunter2") {
					t.Fatalf("log at the most verbose level contains the secret:\n%s", out)
				}
				for _, want := range []string{"***stripped***", "vol-1", "pvc-1", "pool full", "cannot stage", "trace-1"} {
					if !strings.Contains(out, want) {
						t.Errorf("log lacks %q:\n%s", want, out)
					}
				}
			})
		}
	}
}

func TestLinesAtDebug(t *testing.T) {
	var buf testenv.SyncBuffer
	c := start(t, false, slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), logging.Options{})
	exercise(t, c)
	lines := logLines(t, &buf)

	type call struct{ started, finished map[string]any }
	calls := map[string]*call{} // by request ID
	for _, l := range lines {
		if l["msg"] == "panic recovered" {
			continue
		}
		id, _ := l[requestid.LogKey].(string)
		if id == "" {
			t.Fatalf("line without %s: %v", requestid.LogKey, l)
		}
		if calls[id] == nil {
			calls[id] = &call{}
		}
		switch l["msg"] {
		case logging.MsgStarted:
			calls[id].started = l
		case logging.MsgFinished:
			calls[id].finished = l
		default:
			t.Errorf("unexpected line %v", l)
		}
	}
	if len(calls) != 6 {
		t.Fatalf("got %d request IDs, want 6 (one per call):\n%s", len(calls), buf.String())
	}
	for id, c := range calls {
		if c.started == nil || c.finished == nil {
			t.Errorf("request %s: want a started and a finished line, got %v / %v", id, c.started, c.finished)
			continue
		}
		if c.started[logging.KeyMethod] != c.finished[logging.KeyMethod] || c.started[logging.KeyMethod] == nil {
			t.Errorf("request %s: method %v vs %v", id, c.started[logging.KeyMethod], c.finished[logging.KeyMethod])
		}
		if _, ok := c.started[logging.KeyRequest].(map[string]any); !ok {
			t.Errorf("request %s: started line has no request object: %v", id, c.started)
		}
		if _, ok := c.finished[logging.KeyDuration].(float64); !ok {
			t.Errorf("request %s: no duration: %v", id, c.finished)
		}
		code := c.finished[logging.KeyCode]
		_, hasErr := c.finished[logging.KeyError]
		_, hasResp := c.finished[logging.KeyResponse]
		if (code == "OK") == hasErr || (code == "OK") != hasResp {
			t.Errorf("request %s: code %v with error=%v response=%v; want error only on failure, response only on success",
				id, code, hasErr, hasResp)
		}
	}
	probe := calls["trace-1"]
	if probe == nil || probe.finished[logging.KeyMethod] != "/csi.v1.Identity/Probe" || probe.finished["level"] != "DEBUG" {
		t.Errorf("Probe with client ID trace-1: got %v", probe)
	}
	var levels []string
	for _, c := range calls {
		levels = append(levels, fmt.Sprint(c.finished[logging.KeyCode], "=", c.finished["level"]))
	}
	for _, want := range []string{"OK=DEBUG", "ResourceExhausted=WARN", "Internal=ERROR", "Unimplemented=INFO"} {
		if !strings.Contains(strings.Join(levels, " "), want) {
			t.Errorf("levels %v: want %s", levels, want)
		}
	}
}

func TestInfoLevelLogsOnlyFailures(t *testing.T) {
	var buf testenv.SyncBuffer
	exercise(t, start(t, true, slog.New(slog.NewJSONHandler(&buf, nil)), logging.Options{}))
	var codesSeen []string
	for _, l := range logLines(t, &buf) {
		if l["msg"] != logging.MsgFinished {
			continue
		}
		codesSeen = append(codesSeen, l[logging.KeyCode].(string))
		if _, ok := l[logging.KeyRequest]; ok {
			t.Errorf("request body logged at Info: %v", l)
		}
		if _, ok := l[logging.KeyResponse]; ok {
			t.Errorf("response body logged at Info: %v", l)
		}
	}
	if got, want := strings.Join(codesSeen, ","), "ResourceExhausted,Internal,Unimplemented"; got != want {
		t.Errorf("finished lines at Info: got codes %s, want %s", got, want)
	}
}

func TestCodeToLevel(t *testing.T) {
	var buf testenv.SyncBuffer
	opts := logging.Options{CodeToLevel: func(c codes.Code) slog.Level {
		if c == codes.OK {
			return slog.LevelInfo
		}
		return slog.LevelError
	}}
	c := start(t, true, slog.New(slog.NewJSONHandler(&buf, nil)), opts)
	if _, err := c.id.Probe(t.Context(), &csi.ProbeRequest{}); err != nil {
		t.Fatal(err)
	}
	lines := logLines(t, &buf)
	if len(lines) != 1 || lines[0]["level"] != "INFO" || lines[0][logging.KeyCode] != "OK" {
		t.Errorf("custom CodeToLevel: got %v, want one INFO line for OK", lines)
	}
}

func TestNilLogger(t *testing.T) {
	exercise(t, start(t, true, nil, logging.Options{}))
}

func TestResponseSecretsStripped(t *testing.T) {
	// No v1.14 response carries a secret, but the interceptor must not care:
	// here a handler answers with a message that does.
	var buf testenv.SyncBuffer
	i := logging.UnaryServerInterceptor(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), logging.Options{})
	resp, err := i(context.Background(), &csi.ProbeRequest{}, &grpc.UnaryServerInfo{FullMethod: "/x/Y"},
		func(context.Context, any) (any, error) {
			return &csi.NodeExpandVolumeRequest{VolumeId: "vol-9", Secrets: map[string]string{"k": secret}}, nil
		})
	if err != nil || resp == nil {
		t.Fatalf("got %v, %v", resp, err)
	}
	out := buf.String()
	if strings.Contains(out, secret) || !strings.Contains(out, "vol-9") || !strings.Contains(out, "***stripped***") {
		t.Errorf("response logging: want vol-9 and the marker, no secret; got:\n%s", out)
	}
	if resp.(*csi.NodeExpandVolumeRequest).Secrets["k"] != secret {
		t.Error("logging modified the response")
	}
}

func TestNonProtoBodies(t *testing.T) {
	var buf testenv.SyncBuffer
	i := logging.UnaryServerInterceptor(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), logging.Options{})
	i(context.Background(), struct{ Password string }{secret}, &grpc.UnaryServerInfo{FullMethod: "/x/Y"},
		func(context.Context, any) (any, error) { return struct{ Token string }{secret}, nil })
	if out := buf.String(); strings.Contains(out, secret) || !strings.Contains(out, "not a proto message") {
		t.Errorf("non-proto bodies: got:\n%s", out)
	}
}

func TestLoggerWrappedWithRequestIDHandler(t *testing.T) {
	// A driver that wraps its handler with requestid.NewHandler gets one
	// request_id per line, not two.
	var buf testenv.SyncBuffer
	logger := slog.New(requestid.NewHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	c := start(t, true, logger, logging.Options{})
	if _, err := c.id.Probe(t.Context(), &csi.ProbeRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if n := strings.Count(l, "request_id="); n != 1 {
			t.Errorf("line has %d request_id attributes, want 1: %s", n, l)
		}
	}
}

func TestDefaultCodeToLevelCoversAllCodes(t *testing.T) {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		l := logging.DefaultCodeToLevel(c)
		if c == codes.OK && l != slog.LevelDebug {
			t.Errorf("OK: got %v, want DEBUG", l)
		}
		if c != codes.OK && l < slog.LevelInfo {
			t.Errorf("%v: got %v, want at least INFO for a failure", c, l)
		}
	}
	if l := logging.DefaultCodeToLevel(codes.Code(99)); l != slog.LevelError {
		t.Errorf("unknown code: got %v, want ERROR", l)
	}
}

package requestid_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/requestid"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is an Identity server remembering the request ID of each Probe.
type recorder struct {
	csi.UnimplementedIdentityServer
	mu  sync.Mutex
	ids []string
	ok  []bool
}

func (r *recorder) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	id, ok := requestid.FromContext(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
	r.ok = append(r.ok, ok)
	return &csi.ProbeResponse{}, nil
}

func (r *recorder) last(t *testing.T) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) == 0 || !r.ok[len(r.ok)-1] {
		t.Fatal("handler saw no request ID in its context")
	}
	return r.ids[len(r.ids)-1]
}

type transport struct {
	name   string
	listen func(t *testing.T) (net.Listener, grpc.DialOption, string)
}

var transports = []transport{
	{"unix", func(t *testing.T) (net.Listener, grpc.DialOption, string) {
		dir, err := os.MkdirTemp("", "rid")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		path := filepath.Join(dir, "csi.sock")
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		return l, grpc.WithTransportCredentials(insecure.NewCredentials()), "unix://" + path
	}},
	{"bufconn", func(t *testing.T) (net.Listener, grpc.DialOption, string) {
		l := bufconn.Listen(1 << 16)
		return l, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return l.DialContext(ctx)
		}), "passthrough:///bufconn"
	}},
}

// start serves rec behind the interceptor on tr and returns a client.
func start(t *testing.T, tr transport, rec *recorder) csi.IdentityClient {
	t.Helper()
	l, dial, target := tr.listen(t)
	srv := grpc.NewServer(grpc.UnaryInterceptor(requestid.UnaryServerInterceptor()))
	csi.RegisterIdentityServer(srv, rec)
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(l) }()
	conn, err := grpc.NewClient(target, dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.Stop(); <-done })
	return csi.NewIdentityClient(conn)
}

var generated = regexp.MustCompile(`^[0-9a-f]{8}-[0-9]+$`)

func TestRequestIDOverGRPC(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			rec := &recorder{}
			client := start(t, tr, rec)
			probe := func(md ...string) string {
				t.Helper()
				ctx := t.Context()
				if len(md) > 0 {
					ctx = metadata.AppendToOutgoingContext(ctx, md...)
				}
				if _, err := client.Probe(ctx, &csi.ProbeRequest{}); err != nil {
					t.Fatalf("Probe: %v", err)
				}
				return rec.last(t)
			}

			if got := probe(requestid.MetadataKey, "abc-123"); got != "abc-123" {
				t.Errorf("ID from metadata: got %q, want abc-123", got)
			}
			if got := probe("X-Request-ID", "Upper.Case_1"); got != "Upper.Case_1" {
				t.Errorf("ID from mixed-case key: got %q, want Upper.Case_1", got)
			}
			if got := probe(requestid.MetadataKey, "first", requestid.MetadataKey, "second"); got != "first" {
				t.Errorf("ID with two values: got %q, want first", got)
			}

			a, b := probe(), probe()
			if !generated.MatchString(a) || !generated.MatchString(b) {
				t.Errorf("generated IDs: got %q and %q, want prefix-n", a, b)
			}
			if a == b {
				t.Errorf("two calls got the same generated ID %q", a)
			}
			if strings.Split(a, "-")[0] != strings.Split(b, "-")[0] {
				t.Errorf("generated IDs %q and %q: want the same per-server prefix", a, b)
			}

			// grpc-go clients refuse to send control characters; see
			// TestUnusableIncomingIDs for those.
			for _, bad := range []string{"has space", strings.Repeat("x", requestid.MaxLen+1)} {
				if got := probe(requestid.MetadataKey, bad); !generated.MatchString(got) {
					t.Errorf("unusable incoming ID %q: got %q, want a generated one", bad, got)
				}
			}
			if got := probe(requestid.MetadataKey, strings.Repeat("x", requestid.MaxLen)); len(got) != requestid.MaxLen {
				t.Errorf("ID of MaxLen bytes: got %d bytes, want it kept", len(got))
			}
		})
	}
}

func TestUnusableIncomingIDs(t *testing.T) {
	i := requestid.UnaryServerInterceptor()
	for _, bad := range []string{"", "has space", "tab\there", "new\nline", "ünïcode", "nul\x00", "del\x7f",
		strings.Repeat("x", requestid.MaxLen+1)} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.MD{requestid.MetadataKey: {bad}})
		var got string
		i(ctx, nil, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
			got, _ = requestid.FromContext(ctx)
			return nil, nil
		})
		if !generated.MatchString(got) {
			t.Errorf("incoming ID %q: got %q, want a generated one", bad, got)
		}
	}
}

func TestGeneratorsAreIndependent(t *testing.T) {
	get := func(i grpc.UnaryServerInterceptor) string {
		var id string
		i(context.Background(), nil, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
			id, _ = requestid.FromContext(ctx)
			return nil, nil
		})
		return id
	}
	a, b := get(requestid.UnaryServerInterceptor()), get(requestid.UnaryServerInterceptor())
	if a == b {
		t.Errorf("two interceptors generated the same first ID %q; want distinct random prefixes", a)
	}
}

func TestConcurrentIDsUnique(t *testing.T) {
	i := requestid.UnaryServerInterceptor()
	const n = 1000
	ids := make(chan string, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i(context.Background(), nil, &grpc.UnaryServerInfo{}, func(ctx context.Context, _ any) (any, error) {
				id, _ := requestid.FromContext(ctx)
				ids <- id
				return nil, nil
			})
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("duplicate ID %q", id)
		}
		seen[id] = true
	}
	if len(seen) != n {
		t.Errorf("got %d IDs, want %d", len(seen), n)
	}
}

func TestContext(t *testing.T) {
	if id, ok := requestid.FromContext(context.Background()); ok || id != "" {
		t.Errorf("FromContext(Background) = %q, %v; want \"\", false", id, ok)
	}
	type other struct{}
	ctx := context.WithValue(context.Background(), other{}, "v")
	ctx = requestid.NewContext(ctx, "req-1")
	ctx = context.WithValue(ctx, other{}, "w")
	if id, ok := requestid.FromContext(ctx); !ok || id != "req-1" {
		t.Errorf("FromContext = %q, %v; want req-1, true", id, ok)
	}
	if v := ctx.Value(other{}); v != "w" {
		t.Errorf("other value through the ID context: got %v, want w", v)
	}
	inner := requestid.NewContext(ctx, "req-2")
	if id, _ := requestid.FromContext(inner); id != "req-2" {
		t.Errorf("nested NewContext: got %q, want req-2", id)
	}
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(requestid.NewHandler(slog.NewJSONHandler(&buf, nil)))
	ctx := requestid.NewContext(context.Background(), "req-7")

	logger.InfoContext(ctx, "with id")
	logger.Info("no context")
	logger.InfoContext(ctx, "explicit", requestid.LogKey, "mine")
	logger.With("a", 1).InfoContext(ctx, "with attrs", "b", 2, "c", 3, "d", 4, "e", 5, "f", 6)

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("bad JSON line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want 4:\n%s", len(lines), buf.String())
	}
	for i, want := range []any{"req-7", nil, "mine", "req-7"} {
		if got := lines[i][requestid.LogKey]; got != want {
			t.Errorf("line %d %s: got %v, want %v", i, requestid.LogKey, got, want)
		}
	}
	if strings.Count(buf.String(), `"mine"`) != 1 || strings.Contains(strings.Split(buf.String(), "\n")[2], "req-7") {
		t.Errorf("an explicit %s was duplicated or overridden:\n%s", requestid.LogKey, buf.String())
	}
	if lines[3]["a"] != float64(1) || lines[3]["f"] != float64(6) {
		t.Errorf("WithAttrs or many attrs lost: %v", lines[3])
	}

	buf.Reset()
	slog.New(requestid.NewHandler(slog.NewJSONHandler(&buf, nil))).WithGroup("g").InfoContext(ctx, "grouped", "k", "v")
	if !strings.Contains(buf.String(), `"g":{"k":"v","request_id":"req-7"}`) {
		t.Errorf("WithGroup: got %s", buf.String())
	}
	if slog.New(requestid.NewHandler(slog.NewJSONHandler(&buf, nil))).Enabled(ctx, slog.LevelDebug) {
		t.Error("Enabled(Debug) = true, want the wrapped handler's false")
	}
}

// TestGeneratedIDAllocs: a generated ID costs its context and, formatted,
// its string: nothing else.
func TestGeneratedIDAllocs(t *testing.T) {
	var ctx context.Context
	ic := requestid.UnaryServerInterceptor()
	ic(context.Background(), nil, &grpc.UnaryServerInfo{}, func(c context.Context, _ any) (any, error) { ctx = c; return nil, nil })
	if allocs := testing.AllocsPerRun(100, func() { requestid.FromContext(ctx) }); allocs != 1 {
		t.Errorf("FromContext of a generated ID: got %v allocs, want 1 (the string)", allocs)
	}
}

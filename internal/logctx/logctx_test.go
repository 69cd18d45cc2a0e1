package logctx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/internal/logctx"
)

type idKey struct{}

func idOf(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(idKey{}).(string)
	return id, ok
}

// call returns a context for one call with request ID id whose records go
// to a JSON handler writing to buf.
func call(buf *bytes.Buffer, id string) context.Context {
	ctx := context.WithValue(context.Background(), idKey{}, id)
	return logctx.NewContext(ctx, slog.NewJSONHandler(buf, nil), "/csi.v1.Node/NodeStageVolume", idOf, time.Time{})
}

func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		out = append(out, m)
	}
	return out
}

func TestFromContextBindsTheCall(t *testing.T) {
	var buf bytes.Buffer
	ctx := call(&buf, "req-1")
	l := logctx.FromContext(ctx)
	l.Info("no ctx")                                // context.Background inside
	l.InfoContext(call(&buf, "req-other"), "other") // bound: still req-1
	l.With("volume", "v1").WithGroup("g").Info("grouped", "k", "v")
	got := lines(t, &buf)
	if len(got) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(got), buf.String())
	}
	for _, m := range got[:2] {
		if m[logctx.KeyRequestID] != "req-1" || m[logctx.KeyMethod] != "/csi.v1.Node/NodeStageVolume" {
			t.Errorf("line %v: want request_id req-1 and the method", m)
		}
	}
	if g, _ := got[2]["g"].(map[string]any); got[2]["volume"] != "v1" || g["k"] != "v" || g[logctx.KeyRequestID] != "req-1" {
		t.Errorf("With/WithGroup line = %v", got[2])
	}
	// Outside a call: a logger that discards, never slog.Default.
	if logctx.FromContext(context.Background()).Enabled(context.Background(), slog.LevelError) {
		t.Error("FromContext without a call: want a discarding logger")
	}
}

func TestNewHandlerWithBase(t *testing.T) {
	var callBuf, own bytes.Buffer
	l := slog.New(logctx.NewHandler(slog.NewJSONHandler(&own, nil))).With("pkg", "mount")
	l.InfoContext(call(&callBuf, "req-2"), "during a call")
	l.InfoContext(context.Background(), "outside")
	l.InfoContext(call(&callBuf, "req-3"), "has its own", logctx.KeyRequestID, "explicit")
	if callBuf.Len() != 0 {
		t.Errorf("a handler with a base wrote to the call's handler: %s", callBuf.String())
	}
	got := lines(t, &own)
	if len(got) != 3 {
		t.Fatalf("got %d lines, want 3:\n%s", len(got), own.String())
	}
	if got[0][logctx.KeyRequestID] != "req-2" || got[0]["pkg"] != "mount" || got[0][logctx.KeyMethod] == nil {
		t.Errorf("line in a call = %v", got[0])
	}
	if _, ok := got[1][logctx.KeyRequestID]; ok {
		t.Errorf("line outside a call = %v; want no request_id", got[1])
	}
	if got[2][logctx.KeyRequestID] != "explicit" || strings.Count(own.String(), `"request_id"`) != 2 {
		t.Errorf("a record with its own request_id got a second one: %s", own.String())
	}
}

func TestNewHandlerNilBase(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(logctx.NewHandler(nil)).With("pkg", "idempotency").WithGroup("g")
	ctx := call(&buf, "req-4")
	if !l.Enabled(ctx, slog.LevelInfo) || l.Enabled(ctx, slog.LevelDebug) {
		t.Error("Enabled must follow the call's handler (Info)")
	}
	if l.Enabled(context.Background(), slog.LevelError) {
		t.Error("Enabled outside a call with a nil base: want false")
	}
	l.InfoContext(ctx, "during a call", "k", "v")
	l.InfoContext(context.Background(), "outside a call: dropped")
	got := lines(t, &buf)
	if len(got) != 1 {
		t.Fatalf("got %d lines, want 1:\n%s", len(got), buf.String())
	}
	g, _ := got[0]["g"].(map[string]any)
	if got[0]["pkg"] != "idempotency" || g["k"] != "v" || g[logctx.KeyRequestID] != "req-4" {
		t.Errorf("line = %v", got[0])
	}
}

func TestNewContextNilHandler(t *testing.T) {
	ctx := context.Background()
	if got := logctx.NewContext(ctx, nil, "m", nil, time.Time{}); got != ctx {
		t.Error("NewContext with a nil handler: want ctx unchanged")
	}
}

type otherKey struct{}

func TestStart(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ctx := logctx.NewContext(context.Background(), slog.DiscardHandler, "m", nil, start)
	if got := logctx.Start(context.WithValue(ctx, otherKey{}, 1)); !got.Equal(start) {
		t.Errorf("Start of a call's context: got %v, want %v", got, start)
	}
	if got := logctx.Start(context.Background()); !got.IsZero() {
		t.Errorf("Start outside a call: got %v, want zero", got)
	}
}

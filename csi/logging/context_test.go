package logging_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/logging"
	"github.com/csikit/csikit/csi/requestid"
	"github.com/csikit/csikit/internal/logctx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/csikit/csikit/internal/testenv"
)

// GetPluginInfo logs through the call's logger.
func (driver) GetPluginInfo(ctx context.Context, _ *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	logging.FromContext(ctx).Info("driver says hello")
	return &csi.GetPluginInfoResponse{Name: "test.csikit.dev", VendorVersion: "v1"}, nil
}

func TestContextKeysMatch(t *testing.T) {
	if logctx.KeyRequestID != requestid.LogKey || logctx.KeyMethod != logging.KeyMethod {
		t.Errorf("internal/logctx keys %q, %q; want %q, %q", logctx.KeyRequestID, logctx.KeyMethod, requestid.LogKey, logging.KeyMethod)
	}
}

func TestFromContextThroughServer(t *testing.T) {
	// Over a real socket: the driver's FromContext lines carry the ID the
	// client sent and the method, as the interceptor's line does.
	var buf testenv.SyncBuffer
	c := start(t, false, slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), logging.Options{})
	ctx := metadata.AppendToOutgoingContext(t.Context(), requestid.MetadataKey, "rid-ctx-1")
	if _, err := c.id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	var driverLines int
	for _, l := range logLines(t, &buf) {
		if l[requestid.LogKey] != "rid-ctx-1" || l[logging.KeyMethod] != "/csi.v1.Identity/GetPluginInfo" {
			t.Errorf("line without the call's request ID and method: %v", l)
		}
		if l["msg"] == "driver says hello" {
			driverLines++
		}
	}
	if driverLines != 1 {
		t.Errorf("got %d driver lines, want 1:\n%s", driverLines, buf.String())
	}
}

func TestNewContext(t *testing.T) {
	var buf testenv.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	ctx := logging.NewContext(requestid.NewContext(context.Background(), "rid-7"), logger)
	logging.FromContext(ctx).Info("hello")
	if out := buf.String(); !strings.Contains(out, "request_id=rid-7") || strings.Contains(out, "method=") {
		t.Errorf("NewContext logger wrote %q; want request_id=rid-7 and no method", out)
	}
	if logging.NewContext(ctx, nil) != ctx {
		t.Error("NewContext(ctx, nil): want ctx")
	}
}

func TestNilLoggerInstallsNone(t *testing.T) {
	i := logging.UnaryServerInterceptor(nil, logging.Options{})
	i(context.Background(), &csi.ProbeRequest{}, &grpc.UnaryServerInfo{FullMethod: "/x/Y"}, func(ctx context.Context, _ any) (any, error) {
		if logging.FromContext(ctx).Enabled(ctx, slog.LevelError) {
			t.Error("nil logger: FromContext must discard")
		}
		return nil, nil
	})
}

package logging_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit/csi/logging"
	"github.com/csikit/csikit/csi/requestid"
)

type oneRequestStream struct {
	grpc.ServerStream
	req proto.Message
}

func (s *oneRequestStream) Context() context.Context { return context.Background() }
func (s *oneRequestStream) RecvMsg(m any) error {
	proto.Merge(m.(proto.Message), s.req)
	return nil
}
func (s *oneRequestStream) SendMsg(any) error { return nil }

// TestStreamLines: a streaming call gets a "call started" line at Debug
// with its request stripped of secrets, and a "call finished" line with
// code, messages sent and the error redacted against the request.
func TestStreamLines(t *testing.T) {
	const secret = "tok-\"quoted\"\nnewline"
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ic := logging.StreamServerInterceptor(logger, logging.Options{})
	req := &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-1", Secrets: map[string]string{"token": secret}}
	err := ic(nil, &oneRequestStream{req: req}, &grpc.StreamServerInfo{FullMethod: csi.SnapshotMetadata_GetMetadataAllocated_FullMethodName},
		func(_ any, ss grpc.ServerStream) error {
			var r csi.GetMetadataAllocatedRequest
			if err := ss.RecvMsg(&r); err != nil {
				return err
			}
			for range 3 {
				if err := ss.SendMsg(&csi.GetMetadataAllocatedResponse{}); err != nil {
					return err
				}
			}
			return status.Errorf(codes.Unavailable, "backend refused token %s", r.GetSecrets()["token"])
		})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want the handler's error", err)
	}
	out := buf.String()
	if strings.Contains(out, "tok-") {
		t.Errorf("secret in the log:\n%s", out)
	}
	for _, want := range []string{`"msg":"call started"`, `"snapshot_id":"snap-1"`, `"msg":"call finished"`, `"code":"Unavailable"`, `"sent":3`, `backend refused token`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

// TestLevelOption: Options.Level sees the method and code.
func TestLevelOption(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ic := logging.UnaryServerInterceptor(logger, logging.Options{Level: func(m string, c codes.Code) slog.Level {
		if strings.HasSuffix(m, "/CreateVolume") {
			return slog.LevelInfo
		}
		return slog.LevelDebug
	}})
	h := func(context.Context, any) (any, error) { return &csi.ProbeResponse{}, nil }
	for _, m := range []string{csi.Identity_Probe_FullMethodName, csi.Controller_CreateVolume_FullMethodName} {
		if _, err := ic(context.Background(), &csi.ProbeRequest{}, &grpc.UnaryServerInfo{FullMethod: m}, h); err != nil {
			t.Fatal(err)
		}
	}
	if out := buf.String(); strings.Contains(out, "Probe") || !strings.Contains(out, "CreateVolume") {
		t.Errorf("want only CreateVolume logged:\n%s", out)
	}
}

// TestFullMethodOption: an interceptor made for one method writes the
// same lines as one made for all (the method attribute first, then the
// request ID), and logs other methods' calls with their own method.
func TestFullMethodOption(t *testing.T) {
	// A fixed clock and duration make the lines comparable byte for byte.
	fixed := func(groups []string, a slog.Attr) slog.Attr {
		switch a.Key {
		case slog.TimeKey:
			return slog.String(a.Key, "T")
		case logging.KeyDuration:
			return slog.String(a.Key, "D")
		}
		return a
	}
	run := func(opts logging.Options, method string, text bool) string {
		var buf bytes.Buffer
		hopts := &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: fixed}
		var h slog.Handler = slog.NewJSONHandler(&buf, hopts)
		if text {
			h = slog.NewTextHandler(&buf, hopts)
		}
		ic := logging.UnaryServerInterceptor(slog.New(h), opts)
		ctx := requestid.NewContext(context.Background(), "req-1")
		handler := func(ctx context.Context, _ any) (any, error) {
			logging.FromContext(ctx).Info("driver line")
			return nil, status.Error(codes.NotFound, "no volume")
		}
		if _, err := ic(ctx, &csi.DeleteVolumeRequest{VolumeId: "v"}, &grpc.UnaryServerInfo{FullMethod: method}, handler); status.Code(err) != codes.NotFound {
			t.Fatalf("got %v, want NotFound", err)
		}
		return buf.String()
	}
	del, probe := csi.Controller_DeleteVolume_FullMethodName, csi.Identity_Probe_FullMethodName
	for _, text := range []bool{false, true} {
		want := run(logging.Options{}, del, text)
		if got := run(logging.Options{FullMethod: del}, del, text); got != want {
			t.Errorf("text=%v: with FullMethod:\n%s\nwithout:\n%s", text, got, want)
		}
		if !strings.Contains(want, "DeleteVolume") || strings.Count(want, "req-1") != 3 {
			t.Errorf("text=%v: lines lack the method or request ID:\n%s", text, want)
		}
		// A call of another method is logged with its own method, once.
		got := run(logging.Options{FullMethod: del}, probe, text)
		if want := run(logging.Options{}, probe, text); got != want || strings.Contains(got, "DeleteVolume") {
			t.Errorf("text=%v: other method with FullMethod:\n%s\nwithout:\n%s", text, got, want)
		}
	}
}

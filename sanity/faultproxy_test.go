//go:build linux

package sanity_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/sanity"
)

// proxyFaults are faults csikit's own layers would mask (its request
// validation answers before the driver is called), so they are injected
// by a gRPC proxy between the harness and a csikit-served reference
// driver: to the harness the pair is a driver without those layers.
var proxyFaults = map[string]func(method string, req []byte) (resp []byte, handled bool, err error){
	// Accepts NodePublishVolume without a staging path although the
	// driver advertises STAGE_UNSTAGE_VOLUME.
	"publish_unstaged": func(method string, req []byte) ([]byte, bool, error) {
		if method != csi.Node_NodePublishVolume_FullMethodName {
			return nil, false, nil
		}
		var r csi.NodePublishVolumeRequest
		if proto.Unmarshal(req, &r) != nil || r.GetStagingTargetPath() != "" || r.GetVolumeId() == "" || r.GetTargetPath() == "" || r.GetVolumeCapability() == nil {
			return nil, false, nil
		}
		return []byte{}, true, nil // an empty NodePublishVolumeResponse
	},
	// Puts the secrets, as Go's %v prints a map, into the NOT_FOUND
	// error of CreateSnapshot for a missing source volume.
	"secret_in_error": func(method string, req []byte) ([]byte, bool, error) {
		var r csi.CreateSnapshotRequest
		if method != csi.Controller_CreateSnapshot_FullMethodName || proto.Unmarshal(req, &r) != nil || r.GetName() == "" || !strings.HasPrefix(r.GetSourceVolumeId(), "sanity-missing-") {
			return nil, false, nil
		}
		return nil, true, status.Errorf(codes.NotFound, "source volume not found (credentials %v)", r.GetSecrets())
	},
	// Puts the secret values that escaping changes, %q-escaped, into the
	// NOT_FOUND error of NodeStageVolume for a missing volume: no raw
	// value is in the message, only escaped forms.
	"secret_in_error_escaped": func(method string, req []byte) ([]byte, bool, error) {
		var r csi.NodeStageVolumeRequest
		if method != csi.Node_NodeStageVolume_FullMethodName || proto.Unmarshal(req, &r) != nil || r.GetStagingTargetPath() == "" || r.GetVolumeCapability() == nil ||
			!strings.HasPrefix(r.GetVolumeId(), "sanity-missing-") {
			return nil, false, nil
		}
		var vals []string
		for _, v := range r.GetSecrets() {
			if strconv.Quote(v) != `"`+v+`"` {
				vals = append(vals, strconv.Quote(v))
			}
		}
		return nil, true, status.Errorf(codes.NotFound, "volume not found (tried credentials %s)", strings.Join(vals, ", "))
	},
}

// rawCodec passes messages through as bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// proxyTarget serves the reference driver through csikit on one socket
// and, on another, a proxy that forwards every unary call to it unless
// fault handles it. It returns the proxy's endpoint.
func proxyTarget(t *testing.T, fault string, log *sanity.LogBuffer) sanity.Target {
	dir, err := os.MkdirTemp("", "sanity-proxy") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := csikit.NewServer(newRefDriver(filepath.Join(dir, "state"), logger, ""), csikit.Options{
		Name: "ref.sanity.csikit.dev", Version: "v1.0.0", NodeID: "node-1", Clone: true, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	driverSock := filepath.Join(dir, "driver.sock")
	go func() { done <- srv.ListenAndServe(ctx, "unix://"+driverSock) }()
	t.Cleanup(func() { cancel(); <-done })
	// The harness dials the proxy at once; the driver must listen first.
	for i := 0; ; i++ {
		if _, err := os.Stat(driverSock); err == nil {
			break
		}
		if i == 500 {
			t.Fatalf("driver socket %s did not appear", driverSock)
		}
		time.Sleep(10 * time.Millisecond)
	}

	upstream, err := grpc.NewClient("unix://"+driverSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { upstream.Close() })
	inject := proxyFaults[fault]
	proxy := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		method, _ := grpc.MethodFromServerStream(stream)
		var in []byte
		if err := stream.RecvMsg(&in); err != nil {
			return err
		}
		if out, ok, err := inject(method, in); ok {
			if err != nil {
				return err
			}
			return stream.SendMsg(&out)
		}
		var out []byte
		if err := upstream.Invoke(stream.Context(), method, &in, &out, grpc.ForceCodec(rawCodec{})); err != nil {
			return err
		}
		return stream.SendMsg(&out)
	}))
	proxySock := filepath.Join(dir, "proxy.sock")
	l, err := net.Listen("unix", proxySock)
	if err != nil {
		t.Fatal(err)
	}
	go proxy.Serve(l)
	t.Cleanup(proxy.Stop)
	return sanity.Endpoint("unix://" + proxySock)
}

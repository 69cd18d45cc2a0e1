//go:build linux

package sanity_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/sanity"
)

// proxyFaults are faults csikit's own layers would mask (its request
// validation answers before the driver is called), so they are injected
// by a gRPC proxy between the harness and a csikit-served reference
// driver: to the harness the pair is a driver without those layers.
var proxyFaults = map[string]func(method string, req []byte) (resp []byte, handled bool){
	// Accepts NodePublishVolume without a staging path although the
	// driver advertises STAGE_UNSTAGE_VOLUME.
	"publish_unstaged": func(method string, req []byte) ([]byte, bool) {
		if method != csi.Node_NodePublishVolume_FullMethodName {
			return nil, false
		}
		var r csi.NodePublishVolumeRequest
		if proto.Unmarshal(req, &r) != nil || r.GetStagingTargetPath() != "" {
			return nil, false
		}
		return []byte{}, true // an empty NodePublishVolumeResponse
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
func proxyTarget(t *testing.T, fault string) sanity.Target {
	dir, err := os.MkdirTemp("", "sanity-proxy") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := csikit.NewServer(newRefDriver(filepath.Join(dir, "state"), nil, ""), csikit.Options{
		Name: "ref.sanity.csikit.dev", Version: "v1.0.0", NodeID: "node-1", Clone: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	driverSock := filepath.Join(dir, "driver.sock")
	go func() { done <- srv.ListenAndServe(ctx, "unix://"+driverSock) }()
	t.Cleanup(func() { cancel(); <-done })

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
		if out, ok := inject(method, in); ok {
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

package csikit

import (
	"context"
	"log/slog"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type benchDriver struct {
	csi.UnimplementedControllerServer
}

func (benchDriver) CreateVolume(_ context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-" + r.GetName(), CapacityBytes: r.GetCapacityRange().GetRequiredBytes()}}, nil
}

func (benchDriver) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return &csi.DeleteVolumeResponse{}, nil
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkChainOnly isolates what csikit adds to a call on the server
// side — the interceptor chain, the table's handler — from the transport,
// which dominates an in-process gRPC call and makes wall-clock ratios on a
// shared machine noisy: "bare" runs grpc-go's generated handler of the
// spec (decode, call the driver), "csikit" the server's handler with its
// full chain and a logger at Info into a discarding text handler, exactly
// as BenchmarkOverhead's csikit server. The difference is the chain's
// cost per call.
func BenchmarkChainOnly(b *testing.B) {
	logger := slog.New(slog.NewTextHandler(discardWriter{}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := NewServer(benchDriver{}, Options{Name: "bench.csikit.dev", Version: "v1", Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	create := &csi.CreateVolumeRequest{Name: "bench", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}}}
	probe := &csi.ProbeRequest{}
	for _, tc := range []struct {
		name   string
		method string
		req    proto.Message
	}{
		{name: "Probe", method: csi.Identity_Probe_FullMethodName, req: probe},
		{name: "CreateVolume", method: csi.Controller_CreateVolume_FullMethodName, req: create},
	} {
		dec := func(m any) error { proto.Merge(m.(proto.Message), tc.req); return nil }
		ctx := context.Background()
		b.Run(tc.name+"/bare", func(b *testing.B) {
			var call func() (any, error)
			switch tc.method {
			case csi.Identity_Probe_FullMethodName:
				h := csi.Identity_ServiceDesc.Methods[2].Handler
				call = func() (any, error) { return h(bareIdentity{}, ctx, dec, nil) }
			default:
				h := csi.Controller_ServiceDesc.Methods[0].Handler
				call = func() (any, error) { return h(benchDriver{}, ctx, dec, nil) }
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := call(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(tc.name+"/csikit", func(b *testing.B) {
			bd := s.rpcs[tc.method]
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bd.handleUnary(nil, ctx, dec, s.otherUnary); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type bareIdentity struct {
	csi.UnimplementedIdentityServer
}

func (bareIdentity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

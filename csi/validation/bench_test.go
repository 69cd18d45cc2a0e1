package validation_test

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/validation"
	"google.golang.org/grpc"
)

// TestSuccessPathDoesNotAllocate checks the package's promise that a valid
// request costs no allocation, for every RPC.
func TestSuccessPathDoesNotAllocate(t *testing.T) {
	cfg := cfgAll()
	cfg.AccessModes = []csi.VolumeCapability_AccessMode_Mode{snw, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY}
	for full, req := range validRequests() {
		if err := validation.Validate(full, req, cfg); err != nil {
			t.Fatalf("%s: %v", full, err)
		}
		if n := testing.AllocsPerRun(100, func() { _ = validation.Validate(full, req, cfg) }); n != 0 {
			t.Errorf("%s: got %v allocations per call, want 0", full, n)
		}
	}
}

func benchValidate(b *testing.B, full string) {
	req := validRequests()[full]
	cfg := cfgAll()
	b.ReportAllocs()
	for b.Loop() {
		if err := validation.Validate(full, req, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	b.Run("CreateVolume", func(b *testing.B) { benchValidate(b, csi.Controller_CreateVolume_FullMethodName) })
	b.Run("NodePublishVolume", func(b *testing.B) { benchValidate(b, csi.Node_NodePublishVolume_FullMethodName) })
	b.Run("DeleteVolume", func(b *testing.B) { benchValidate(b, csi.Controller_DeleteVolume_FullMethodName) })
	b.Run("Probe", func(b *testing.B) { benchValidate(b, csi.Identity_Probe_FullMethodName) })
	b.Run("CreateVolume/invalid", func(b *testing.B) {
		req := &csi.CreateVolumeRequest{Name: "pvc-1"}
		b.ReportAllocs()
		for b.Loop() {
			if validation.Validate(csi.Controller_CreateVolume_FullMethodName, req, nil) == nil {
				b.Fatal("got nil, want an error")
			}
		}
	})
}

// BenchmarkUnaryServerInterceptor measures the interceptor around a no-op
// handler, as the server chain runs it.
func BenchmarkUnaryServerInterceptor(b *testing.B) {
	icpt := validation.UnaryServerInterceptor(*cfgAll())
	req := validRequests()[csi.Node_NodePublishVolume_FullMethodName]
	info := &grpc.UnaryServerInfo{FullMethod: csi.Node_NodePublishVolume_FullMethodName}
	handler := func(context.Context, any) (any, error) { return nil, nil }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := icpt(ctx, req, info, handler); err != nil {
			b.Fatal(err)
		}
	}
}

package logging_test

import (
	"context"
	"log/slog"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/logging"
)

func ExampleFromContext() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: stable}))
	interceptor := logging.UnaryServerInterceptor(logger, logging.Options{})

	// A driver method, as the interceptor calls it: its lines carry the
	// call's request ID and method, like the SDK's own lines for the call.
	createVolume := func(ctx context.Context, req any) (any, error) {
		logging.FromContext(ctx).Info("creating image", "pool", "fast")
		return &csi.CreateVolumeResponse{}, nil
	}
	call(interceptor, "/csi.v1.Controller/CreateVolume", &csi.CreateVolumeRequest{Name: "pvc-1"}, createVolume)
	// Output:
	// level=INFO msg="creating image" pool=fast request_id=req-1 method=/csi.v1.Controller/CreateVolume
}

func ExampleNewContextHandler() {
	serverLog := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: stable}))
	interceptor := logging.UnaryServerInterceptor(serverLog, logging.Options{})

	// A library that was given no logger of its own: during a call its
	// lines go to the call's logger, outside a call nowhere.
	libLog := slog.New(logging.NewContextHandler(nil)).With("lib", "backend")
	libLog.Info("not in a call: dropped")
	call(interceptor, "/csi.v1.Node/NodeStageVolume", &csi.NodeStageVolumeRequest{}, func(ctx context.Context, _ any) (any, error) {
		libLog.InfoContext(ctx, "attached", "device", "/dev/sdb")
		return &csi.NodeStageVolumeResponse{}, nil
	})
	// Output:
	// level=INFO msg=attached lib=backend device=/dev/sdb request_id=req-1 method=/csi.v1.Node/NodeStageVolume
}

package kube_test

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/sanity/kube"
)

func TestRecorder(t *testing.T) {
	rec := &kube.Recorder{}
	ic := rec.Interceptor()
	req := &csi.CreateVolumeRequest{Name: "v", Secrets: map[string]string{"k": "s"}}
	_, err := ic(context.Background(), req, &grpc.UnaryServerInfo{FullMethod: csi.Controller_CreateVolume_FullMethodName},
		func(ctx context.Context, r any) (any, error) {
			return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "id-1"}}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ic(context.Background(), &csi.DeleteVolumeRequest{VolumeId: "id-1"}, &grpc.UnaryServerInfo{FullMethod: csi.Controller_DeleteVolume_FullMethodName},
		func(ctx context.Context, r any) (any, error) { return nil, status.Error(codes.Aborted, "busy") })
	if status.Code(err) != codes.Aborted {
		t.Fatalf("interceptor error: got %v, want the handler's Aborted", err)
	}
	req.Name = "changed after the call"
	creates := rec.Calls(csi.Controller_CreateVolume_FullMethodName)
	if len(creates) != 1 {
		t.Fatalf("CreateVolume calls: got %d, want 1", len(creates))
	}
	if got := creates[0].Request.(*csi.CreateVolumeRequest).GetName(); got != "v" {
		t.Errorf("recorded request name: got %q, want %q (a copy, not the caller's message)", got, "v")
	}
	if got := creates[0].Response.(*csi.CreateVolumeResponse).GetVolume().GetVolumeId(); got != "id-1" {
		t.Errorf("recorded response volume ID: got %q, want id-1", got)
	}
	dels := rec.Calls(csi.Controller_DeleteVolume_FullMethodName)
	if len(dels) != 1 || dels[0].Code() != "Aborted" || dels[0].Response != nil {
		t.Errorf("DeleteVolume call: got %+v, want one Aborted call without a response", dels)
	}
	if got := len(rec.Calls("")); got != 2 {
		t.Errorf("all calls: got %d, want 2", got)
	}
}

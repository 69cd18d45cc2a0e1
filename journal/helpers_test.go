package journal_test

import (
	"context"
	"maps"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/idempotency"
)

// The KV's deferred writes and Request exist for calls the idempotency
// interceptor journals; these helpers run such calls.

const (
	mCreate = csi.Controller_CreateVolume_FullMethodName
	mDelete = csi.Controller_DeleteVolume_FullMethodName
)

// newIC returns an interceptor with csikit's lock keys, amended by o.Keys.
func newIC(t *testing.T, o idempotency.Options) *idempotency.Interceptor {
	t.Helper()
	keys := csikit.LockKeys()
	maps.Copy(keys, o.Keys)
	o.Keys = keys
	ic, err := idempotency.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return ic
}

// call runs req through the interceptor with handler as the driver.
func call(ctx context.Context, ic *idempotency.Interceptor, method string, req any, h grpc.UnaryHandler) (any, error) {
	return ic.UnaryServerInterceptor()(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, h)
}

func createVol(name string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}}
}

func volID(t *testing.T, ic *idempotency.Interceptor, req *csi.CreateVolumeRequest, h grpc.UnaryHandler) string {
	t.Helper()
	resp, err := call(context.Background(), ic, mCreate, req, h)
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	return resp.(*csi.CreateVolumeResponse).GetVolume().GetVolumeId()
}

func cloneVol(name, src string) *csi.CreateVolumeRequest {
	r := createVol(name)
	r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: src}}}
	return r
}

func restoreVol(name, snap string) *csi.CreateVolumeRequest {
	r := createVol(name)
	r.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap}}}
	return r
}

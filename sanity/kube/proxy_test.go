package kube_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/sanity/kube"
)

// The proxy forwards calls to a driver unchanged, answers with the
// driver's response or its exact error, and records both; with no driver
// behind it a call is Unavailable.
func TestProxy(t *testing.T) {
	drv := kube.ServeDriver(t, newFakeDriver().server)
	p := kube.StartProxy(t, drv.Endpoint)
	dial := func(ep string) *grpc.ClientConn {
		c, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx := context.Background()
	via, direct := dial(p.Endpoint), dial(drv.Endpoint)

	info, err := csi.NewIdentityClient(via).GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil || info.GetName() != fakeDriverName {
		t.Fatalf("GetPluginInfo through the proxy: got %v, %v; want %s", info, err, fakeDriverName)
	}
	req := &csi.CreateVolumeRequest{
		Name: "pvc-1", Secrets: map[string]string{"user": "u", "key": "k"},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	}
	resp, err := csi.NewControllerClient(via).CreateVolume(ctx, req)
	if err != nil {
		t.Fatalf("CreateVolume through the proxy: %v", err)
	}
	// An error keeps its code and message.
	bad := &csi.CreateVolumeRequest{Name: "pvc-2"} // no capabilities
	_, errVia := csi.NewControllerClient(via).CreateVolume(ctx, bad)
	_, errDirect := csi.NewControllerClient(direct).CreateVolume(ctx, bad)
	if status.Code(errVia) != codes.InvalidArgument || status.Convert(errVia).Message() != status.Convert(errDirect).Message() {
		t.Errorf("error through the proxy: got %v, want the driver's own %v", errVia, errDirect)
	}

	creates := p.Recorder.Calls(csi.Controller_CreateVolume_FullMethodName)
	if len(creates) != 2 {
		t.Fatalf("recorded CreateVolume calls: got %d, want 2", len(creates))
	}
	got := creates[0].Request.(*csi.CreateVolumeRequest)
	if got.GetName() != "pvc-1" || got.GetSecrets()["key"] != "k" || got.GetCapacityRange().GetRequiredBytes() != 1<<20 {
		t.Errorf("recorded request: got name %q, %d secrets, %d bytes; want the one sent", got.GetName(), len(got.GetSecrets()), got.GetCapacityRange().GetRequiredBytes())
	}
	if id := creates[0].Response.(*csi.CreateVolumeResponse).GetVolume().GetVolumeId(); id == "" || id != resp.GetVolume().GetVolumeId() {
		t.Errorf("recorded response volume ID: got %q, want %q", id, resp.GetVolume().GetVolumeId())
	}
	if creates[1].Code() != "InvalidArgument" || creates[1].Response != nil {
		t.Errorf("recorded failed call: got %s with response %v, want InvalidArgument and none", creates[1].Code(), creates[1].Response)
	}
	if n := len(p.Recorder.Calls(csi.Identity_GetPluginInfo_FullMethodName)); n != 1 {
		t.Errorf("recorded GetPluginInfo calls: got %d, want 1", n)
	}

	none := kube.StartProxy(t, filepath.Join(t.TempDir(), "absent.sock"))
	_, err = csi.NewIdentityClient(dial(none.Endpoint)).Probe(ctx, &csi.ProbeRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("Probe with no driver behind the proxy: got %v, want Unavailable", err)
	}
}

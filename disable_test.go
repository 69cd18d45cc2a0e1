package csikit_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/k8s/csidriver"
)

// fullController implements attach and modify next to provisioning; which
// of them a deployment offers is chosen by Options.Disable.
type fullController struct{ volumes }

func (fullController) ControllerPublishVolume(context.Context, *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	return &csi.ControllerPublishVolumeResponse{}, nil
}

func (fullController) ControllerUnpublishVolume(context.Context, *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (fullController) ControllerModifyVolume(context.Context, *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	return &csi.ControllerModifyVolumeResponse{}, nil
}

func controllerCaps(srv *csikit.Server) []string {
	var out []string
	for _, c := range srv.Capabilities().Controller {
		out = append(out, c.GetRpc().GetType().String())
	}
	return out
}

func TestDisableSwitchesOffAnImplementedInterface(t *testing.T) {
	opts := csikit.Options{Name: "toy.vendor.example", Version: "v1", Alpha: true}
	all, err := csikit.NewServer(fullController{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(controllerCaps(all), " "); !strings.Contains(got, "PUBLISH_UNPUBLISH_VOLUME") || !strings.Contains(got, "MODIFY_VOLUME") {
		t.Fatalf("without Disable: %s", got)
	}
	opts.Disable = []reflect.Type{reflect.TypeFor[csikit.ControllerPublisher](), reflect.TypeFor[csikit.Modifier]()}
	s := serve(t, fullController{}, opts)
	if got := strings.Join(controllerCaps(s.srv), " "); strings.Contains(got, "PUBLISH_UNPUBLISH_VOLUME") || strings.Contains(got, "MODIFY_VOLUME") {
		t.Fatalf("disabled interfaces still advertised: %s", got)
	}
	if s.srv.Serves(csi.Controller_ControllerPublishVolume_FullMethodName) {
		t.Fatal("a disabled RPC is served")
	}
	_, err = csi.NewControllerClient(s.conn).ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n"})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("ControllerPublishVolume on a disabled interface: %v, want Unimplemented", err)
	}
	obj, err := s.srv.CSIDriver(csidriver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if y, _ := obj.YAML(); !strings.Contains(string(y), "attachRequired: false") {
		t.Fatalf("CSIDriver of a server without attach:\n%s", y)
	}
}

func TestDisableRefusesWhatIsNotADriverInterface(t *testing.T) {
	_, err := csikit.NewServer(fullController{}, csikit.Options{
		Name: "toy.vendor.example", Version: "v1", Disable: []reflect.Type{reflect.TypeFor[error]()},
	})
	if err == nil || !strings.Contains(err.Error(), "not a csikit driver interface") {
		t.Fatalf("NewServer: %v", err)
	}
}

// Disabling the only way to answer ValidateVolumeCapabilities makes the
// controller non-conformant, and NewServer says so.
func TestDisableCannotBreakConformance(t *testing.T) {
	_, err := csikit.NewServer(fullController{}, csikit.Options{
		Name: "toy.vendor.example", Version: "v1", Disable: []reflect.Type{reflect.TypeFor[csikit.VolumeLookup]()},
	})
	if err == nil || !strings.Contains(err.Error(), "ValidateVolumeCapabilities") {
		t.Fatalf("NewServer: %v", err)
	}
}

// ValidateVolumeCapabilities answered by csikit from a VolumeLookup and
// Options: NotFound from the lookup, confirmation only of what is served.
func TestValidateVolumeCapabilitiesFromLookup(t *testing.T) {
	s := serve(t, lookupController{}, csikit.Options{Name: "toy.vendor.example", Version: "v1"})
	c := csi.NewControllerClient(s.conn)
	mountRWO := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	block := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	ctx := context.Background()
	if _, err := c.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "missing", VolumeCapabilities: []*csi.VolumeCapability{mountRWO}}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown volume: %v, want NotFound", err)
	}
	resp, err := c.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-1", VolumeCapabilities: []*csi.VolumeCapability{mountRWO}})
	if err != nil || resp.GetConfirmed() == nil {
		t.Fatalf("served capability: %v, %v, want confirmed", resp, err)
	}
	resp, err = c.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "vol-1", VolumeCapabilities: []*csi.VolumeCapability{block}})
	if err != nil || resp.GetConfirmed() != nil || resp.GetMessage() == "" {
		t.Fatalf("block on a mount-only driver: %v, %v, want unconfirmed with a message", resp, err)
	}
}

type lookupController struct{ volumes }

func (lookupController) LookupVolume(_ context.Context, id string) error {
	if id != "vol-1" {
		return status.Errorf(codes.NotFound, "volume %q not found", id)
	}
	return nil
}

// A nil pointer of the driver's type describes the driver: no state opened,
// no method called.
func TestCSIDriverFromANilDriver(t *testing.T) {
	srv, err := csikit.NewServer((*nilSafeDriver)(nil), csikit.Options{Name: "toy.vendor.example", Version: "v1", NodeID: "n"})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := srv.CSIDriver(csidriver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if y, _ := obj.YAML(); !strings.Contains(string(y), "attachRequired: true") {
		t.Fatalf("CSIDriver:\n%s", y)
	}
}

// nilSafeDriver's methods would panic on a nil receiver (they read d.state).
type nilSafeDriver struct{ state map[string]bool }

func (d *nilSafeDriver) CreateVolume(context.Context, *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	_ = d.state["x"]
	return nil, nil
}
func (d *nilSafeDriver) DeleteVolume(context.Context, *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	_ = d.state["x"]
	return nil, nil
}
func (d *nilSafeDriver) LookupVolume(context.Context, string) error { _ = d.state["x"]; return nil }
func (d *nilSafeDriver) ControllerPublishVolume(context.Context, *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	_ = d.state["x"]
	return nil, nil
}
func (d *nilSafeDriver) ControllerUnpublishVolume(context.Context, *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	_ = d.state["x"]
	return nil, nil
}

// Server.Probe, which /healthz asks (runner.ProbeCheck(srv)), answers
// as the gRPC Probe does: with Prober disabled both are ready although the
// driver's own Probe fails, and with it enabled both fail.
func TestServerProbeHonoursDisable(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		disable []reflect.Type
		want    codes.Code
	}{
		{"prober enabled", nil, codes.FailedPrecondition},
		{"prober disabled", []reflect.Type{reflect.TypeFor[csikit.Prober]()}, codes.OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := serve(t, &notReady{}, csikit.Options{Disable: c.disable})
			grpcResp, err := s.identity().Probe(ctx, &csi.ProbeRequest{})
			if status.Code(err) != c.want {
				t.Fatalf("gRPC Probe: %v, %v; want %v", grpcResp, err, c.want)
			}
			resp, err := s.srv.Probe(ctx, &csi.ProbeRequest{})
			if status.Code(err) != c.want {
				t.Fatalf("Server.Probe: %v, %v; want %v like the gRPC Probe", resp, err, c.want)
			}
			if err == nil && !resp.GetReady().GetValue() {
				t.Fatalf("Server.Probe: %v, want ready like the gRPC Probe (%v)", resp, grpcResp)
			}
		})
	}
}

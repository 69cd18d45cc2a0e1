package csikit_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/k8s/csidriver"
)

func ctrlCaps(t *testing.T, s *served) []csi.ControllerServiceCapability_RPC_Type {
	t.Helper()
	resp, err := s.controller().ControllerGetCapabilities(context.Background(), &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatalf("ControllerGetCapabilities: %v", err)
	}
	var out []csi.ControllerServiceCapability_RPC_Type
	for _, c := range resp.GetCapabilities() {
		out = append(out, c.GetRpc().GetType())
	}
	return out
}

func nodeCaps(t *testing.T, s *served) []csi.NodeServiceCapability_RPC_Type {
	t.Helper()
	resp, err := s.node().NodeGetCapabilities(context.Background(), &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatalf("NodeGetCapabilities: %v", err)
	}
	var out []csi.NodeServiceCapability_RPC_Type
	for _, c := range resp.GetCapabilities() {
		out = append(out, c.GetRpc().GetType())
	}
	return out
}

func pluginServices(t *testing.T, s *served) (svcs []csi.PluginCapability_Service_Type, exp []csi.PluginCapability_VolumeExpansion_Type) {
	t.Helper()
	resp, err := s.identity().GetPluginCapabilities(context.Background(), &csi.GetPluginCapabilitiesRequest{})
	if err != nil {
		t.Fatalf("GetPluginCapabilities: %v", err)
	}
	for _, c := range resp.GetCapabilities() {
		if sv := c.GetService(); sv != nil {
			svcs = append(svcs, sv.GetType())
		}
		if e := c.GetVolumeExpansion(); e != nil {
			exp = append(exp, e.GetType())
		}
	}
	return svcs, exp
}

func sorted[T ~int32](s []T) []T { slices.Sort(s); return s }

func TestCapabilitiesControllerOnly(t *testing.T) {
	s := serve(t, &ctrlDriver{}, csikit.Options{Clone: true})
	got := sorted(ctrlCaps(t, s))
	want := sorted([]csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		// GET_VOLUME is alpha in v1.14: not advertised without Options.Alpha.
	})
	if !slices.Equal(got, want) {
		t.Errorf("controller capabilities: got %v, want %v", got, want)
	}
	svcs, exp := pluginServices(t, s)
	if !slices.Equal(svcs, []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_CONTROLLER_SERVICE}) {
		t.Errorf("plugin services: got %v, want only CONTROLLER_SERVICE", svcs)
	}
	if !slices.Equal(exp, []csi.PluginCapability_VolumeExpansion_Type{csi.PluginCapability_VolumeExpansion_ONLINE}) {
		t.Errorf("volume expansion: got %v, want ONLINE", exp)
	}
	// Node RPCs of a controller-only plugin are unimplemented.
	_, err := s.node().NodeGetCapabilities(context.Background(), &csi.NodeGetCapabilitiesRequest{})
	testenv.WantCode(t, err, codes.Unimplemented)
	_, err = s.node().NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{})
	testenv.WantCode(t, err, codes.Unimplemented)
	// So are alpha RPCs the driver implements without opting in.
	_, err = s.controller().ControllerGetVolume(context.Background(), &csi.ControllerGetVolumeRequest{VolumeId: "vol-a"})
	testenv.WantCode(t, err, codes.Unimplemented)
}

func TestCapabilitiesNodeOnly(t *testing.T) {
	s := serve(t, &nodeDriver{}, csikit.Options{NodeID: "n1", Topology: map[string]string{"zone": "a"}, MaxVolumesPerNode: 7})
	got := sorted(nodeCaps(t, s))
	want := sorted([]csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	})
	if !slices.Equal(got, want) {
		t.Errorf("node capabilities: got %v, want %v", got, want)
	}
	svcs, exp := pluginServices(t, s)
	if !slices.Equal(svcs, []csi.PluginCapability_Service_Type{csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS}) {
		t.Errorf("plugin services: got %v, want only VOLUME_ACCESSIBILITY_CONSTRAINTS (no CONTROLLER_SERVICE)", svcs)
	}
	if len(exp) != 0 {
		t.Errorf("volume expansion: got %v, want none", exp)
	}
	info, err := s.node().NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetNodeId() != "n1" || info.GetMaxVolumesPerNode() != 7 || info.GetAccessibleTopology().GetSegments()["zone"] != "a" {
		t.Errorf("NodeGetInfo: got %v, want node n1, max 7, zone a", info)
	}
	for name, call := range map[string]func() error{
		"CreateVolume": func() error {
			_, err := s.controller().CreateVolume(context.Background(), newCreate("x"))
			return err
		},
		"ControllerGetCapabilities": func() error {
			_, err := s.controller().ControllerGetCapabilities(context.Background(), &csi.ControllerGetCapabilitiesRequest{})
			return err
		},
		"NodeExpandVolume": func() error {
			_, err := s.node().NodeExpandVolume(context.Background(), &csi.NodeExpandVolumeRequest{})
			return err
		},
	} {
		if err := call(); err == nil || codesOf(err) != codes.Unimplemented {
			t.Errorf("%s on a node-only plugin: got %v, want Unimplemented", name, err)
		}
	}
}

func TestCapabilitiesFullDriverWithAlpha(t *testing.T) {
	s := serve(t, &fullDriver{}, csikit.Options{
		NodeID: "n1", Alpha: true, SingleNodeMultiWriter: true, VolumeMountGroup: true,
		Expansion: csikit.ExpansionOffline,
	})
	ctrl := ctrlCaps(t, s)
	for _, c := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_GET_VOLUME,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
	} {
		if !slices.Contains(ctrl, c) {
			t.Errorf("controller capabilities %v: missing %v with Alpha", ctrl, c)
		}
	}
	// ReadOnlyPublish without ControllerPublishVolume is refused by
	// NewServer (TestNewServerRejectsBadOptions), no longer dropped.
	node := nodeCaps(t, s)
	for _, c := range []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP,
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
	} {
		if !slices.Contains(node, c) {
			t.Errorf("node capabilities %v: missing %v", node, c)
		}
	}
	_, exp := pluginServices(t, s)
	if !slices.Equal(exp, []csi.PluginCapability_VolumeExpansion_Type{csi.PluginCapability_VolumeExpansion_OFFLINE}) {
		t.Errorf("volume expansion: got %v, want OFFLINE", exp)
	}
	if _, err := s.controller().ControllerGetVolume(context.Background(), &csi.ControllerGetVolumeRequest{VolumeId: "vol-a"}); err != nil {
		t.Errorf("ControllerGetVolume with Alpha: %v", err)
	}
	// Server.Capabilities agrees with what was answered over the wire.
	caps := s.srv.Capabilities()
	if len(caps.Controller) != len(ctrl) || len(caps.Node) != len(node) {
		t.Errorf("Server.Capabilities: got %d/%d, want %d/%d", len(caps.Controller), len(caps.Node), len(ctrl), len(node))
	}
	// ValidateVolumeCapabilities is answered by default from ControllerGetVolume.
	vr, err := s.controller().ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{
		VolumeId: "vol-a", VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
	})
	if err != nil || vr.GetConfirmed() == nil {
		t.Errorf("ValidateVolumeCapabilities(supported): got %v, %v, want confirmed", vr, err)
	}
	vr, err = s.controller().ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{
		VolumeId: "vol-a", VolumeCapabilities: []*csi.VolumeCapability{blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
	})
	if err != nil || vr.GetConfirmed() != nil {
		t.Errorf("ValidateVolumeCapabilities(block on a mount-only driver): got %v, %v, want not confirmed", vr, err)
	}
	_, err = s.controller().ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{
		VolumeId: "missing", VolumeCapabilities: []*csi.VolumeCapability{mountCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
	})
	testenv.WantCode(t, err, codes.NotFound)
}

func TestPluginInfoAndProbe(t *testing.T) {
	s := serve(t, &ctrlDriver{}, csikit.Options{Name: "block.vendor.example", Version: "1.2.3", Manifest: map[string]string{"k": "v"}})
	info, err := s.identity().GetPluginInfo(context.Background(), &csi.GetPluginInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.GetName() != "block.vendor.example" || info.GetVendorVersion() != "1.2.3" || info.GetManifest()["k"] != "v" {
		t.Errorf("GetPluginInfo: got %v", info)
	}
	p, err := s.identity().Probe(context.Background(), &csi.ProbeRequest{})
	if err != nil || !p.GetReady().GetValue() {
		t.Errorf("Probe without a Prober: got %v, %v, want ready", p, err)
	}
}

type notReady struct{ ctrlDriver }

func (*notReady) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return nil, statusErr(codes.FailedPrecondition, "backend not connected")
}

func TestProbeFromProber(t *testing.T) {
	s := serve(t, &notReady{}, csikit.Options{})
	_, err := s.identity().Probe(context.Background(), &csi.ProbeRequest{})
	testenv.WantCode(t, err, codes.FailedPrecondition)
}

func TestCSIDriverFollowsCapabilities(t *testing.T) {
	for _, c := range []struct {
		name   string
		driver any
		attach bool
	}{
		{"no attach", &ctrlDriver{}, false},
		{"attach", &attacher{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, err := csikit.NewServer(c.driver, csikit.Options{Name: "a.example", Version: "1"})
			if err != nil {
				t.Fatal(err)
			}
			obj, err := srv.CSIDriver(csidriver.Options{})
			if err != nil {
				t.Fatal(err)
			}
			y, err := obj.YAML()
			if err != nil {
				t.Fatal(err)
			}
			want := "attachRequired: " + strconv.FormatBool(c.attach)
			if !strings.Contains(string(y), want) || !strings.Contains(string(y), "name: a.example") {
				t.Errorf("CSIDriver YAML lacks %q or the name:\n%s", want, y)
			}
		})
	}
}

type attacher struct{ ctrlDriver }

func (*attacher) ControllerPublishVolume(context.Context, *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	return &csi.ControllerPublishVolumeResponse{}, nil
}

func (*attacher) ControllerUnpublishVolume(context.Context, *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

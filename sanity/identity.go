package sanity

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/csi/validation"
)

// identityCases covers the Identity service.
func identityCases(t *testing.T, s *suite) {
	s.run(t, "GetPluginInfo/name_and_version", func(t *testing.T) {
		req := &csi.GetPluginInfoRequest{}
		resp, err := call(s, s.id.GetPluginInfo, req)
		must(t, "GetPluginInfo", req, err, rule("GetPluginInfo", "every plugin MUST implement it"))
		expect(t, validation.ValidPluginName(resp.GetName()), "GetPluginInfo", req,
			rule("GetPluginInfo", "name is REQUIRED, at most 63 characters, domain-name notation, alphanumeric at both ends"),
			"name %q, want a valid plugin name", resp.GetName())
		expect(t, resp.GetVendorVersion() != "", "GetPluginInfo", req,
			rule("GetPluginInfo", "vendor_version is REQUIRED"), "an empty vendor_version, want one")
	})
	s.run(t, "GetPluginCapabilities/known_values", func(t *testing.T) {
		req := &csi.GetPluginCapabilitiesRequest{}
		resp, err := call(s, s.id.GetPluginCapabilities, req)
		must(t, "GetPluginCapabilities", req, err, rule("GetPluginCapabilities", "every plugin MUST implement it"))
		for _, c := range resp.GetCapabilities() {
			switch {
			case c.GetService() != nil:
				ty := c.GetService().GetType()
				expect(t, ty != csi.PluginCapability_Service_UNKNOWN && csi.PluginCapability_Service_Type_name[int32(ty)] != "",
					"GetPluginCapabilities", req, rule("GetPluginCapabilities", "capabilities are values the spec defines"), "service capability %v, want a defined one", ty)
			case c.GetVolumeExpansion() != nil:
				ty := c.GetVolumeExpansion().GetType()
				expect(t, ty == csi.PluginCapability_VolumeExpansion_ONLINE || ty == csi.PluginCapability_VolumeExpansion_OFFLINE,
					"GetPluginCapabilities", req, rule("GetPluginCapabilities", "VolumeExpansion is ONLINE or OFFLINE"), "volume expansion %v, want ONLINE or OFFLINE", ty)
			default:
				expect(t, false, "GetPluginCapabilities", req, rule("GetPluginCapabilities", "each capability sets one of its types"), "a capability with no type set, want service or volume_expansion")
			}
		}
	})
	s.run(t, "Probe/ready_or_failed_precondition", func(t *testing.T) {
		req := &csi.ProbeRequest{}
		resp, err := call(s, s.id.Probe, req)
		if c := status.Code(err); c != codes.OK && c != codes.FailedPrecondition {
			t.Error(describe("Probe", req, err, "OK or FailedPrecondition", rule("Probe", "a plugin that is not healthy answers FAILED_PRECONDITION; a healthy one OK")))
			return
		}
		if err == nil && resp.GetReady() != nil && !resp.GetReady().GetValue() {
			t.Logf("Probe: driver reports not ready yet")
		}
	})
	s.run(t, "Probe/same_answer_twice", func(t *testing.T) {
		req := &csi.ProbeRequest{}
		_, err1 := call(s, s.id.Probe, req)
		_, err2 := call(s, s.id.Probe, req)
		expect(t, status.Code(err1) == status.Code(err2), "Probe", req, kube("Probe", "the livenessprobe sidecar and the sidecars' startup call Probe again and again; the answer of a healthy driver does not change between calls"),
			"%s then %s, want the same answer", got(err1), got(err2))
	})
}

package sanity

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// expansionCases covers ControllerExpandVolume and NodeExpandVolume
// requests; DataPath checks that expansion is seen on the node.
func expansionCases(t *testing.T, s *suite) {
	s.run(t, "ControllerExpandVolume", func(t *testing.T) {
		s.needCtrl(t, ccCreate, ccExpand)
		s.run(t, "missing_volume_id", func(t *testing.T) {
			req := &csi.ControllerExpandVolumeRequest{CapacityRange: &csi.CapacityRange{RequiredBytes: s.cfg.ExpandSize}, VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
			_, err := call(s, s.ctl.ControllerExpandVolume, req)
			wantCode(t, "ControllerExpandVolume", req, err, rule("ControllerExpandVolume", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
		})
		s.run(t, "missing_capacity", func(t *testing.T) {
			v := s.createVolume(t, s.createReq(s.name("expnocap")))
			req := &csi.ControllerExpandVolumeRequest{VolumeId: v.GetVolumeId(), VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
			_, err := call(s, s.ctl.ControllerExpandVolume, req)
			wantCode(t, "ControllerExpandVolume", req, err, rule("ControllerExpandVolume", "capacity_range is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
		})
		s.run(t, "unknown_volume", func(t *testing.T) {
			req := &csi.ControllerExpandVolumeRequest{VolumeId: s.missingVolumeID(), CapacityRange: &csi.CapacityRange{RequiredBytes: s.cfg.ExpandSize}, VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
			_, err := call(s, s.ctl.ControllerExpandVolume, req)
			wantCode(t, "ControllerExpandVolume", req, err, rule("ControllerExpandVolume", "the volume does not exist → NOT_FOUND"), codes.NotFound)
		})
		s.run(t, "impossible_capacity", func(t *testing.T) {
			v := s.createVolume(t, s.createReq(s.name("exphuge")))
			req := &csi.ControllerExpandVolumeRequest{VolumeId: v.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 62, LimitBytes: 1 << 62}, VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
			_, err := call(s, s.ctl.ControllerExpandVolume, req)
			wantCode(t, "ControllerExpandVolume", req, err, rule("ControllerExpandVolume", "an unsupported capacity → OUT_OF_RANGE"), codes.OutOfRange)
		})
		s.run(t, "grows", func(t *testing.T) {
			v := s.createVolume(t, s.createReq(s.name("exp")))
			req := &csi.ControllerExpandVolumeRequest{VolumeId: v.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: s.cfg.ExpandSize}, VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
			for range s.cfg.IdempotentCount {
				resp, err := retry(s, s.ctl.ControllerExpandVolume, req)
				must(t, "ControllerExpandVolume", req, err, rule("ControllerExpandVolume", "expanding to a supported size MUST succeed, also when repeated"))
				expect(t, resp.GetCapacityBytes() >= s.cfg.ExpandSize, "ControllerExpandVolume", req,
					rule("ControllerExpandVolume", "capacity_bytes is the capacity after expansion, at least required_bytes"), "capacity_bytes %d, want >= %d", resp.GetCapacityBytes(), s.cfg.ExpandSize)
			}
		})
	})
	s.run(t, "NodeExpandVolume", func(t *testing.T) {
		s.needNode(t, ncExpand)
		s.run(t, "missing_volume_id", func(t *testing.T) {
			_, target := s.caseDir(t)
			req := &csi.NodeExpandVolumeRequest{VolumePath: target, VolumeCapability: s.volCap(sw)}
			_, err := call(s, s.node.NodeExpandVolume, req)
			wantCode(t, "NodeExpandVolume", req, err, rule("NodeExpandVolume", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
		})
		s.run(t, "missing_volume_path", func(t *testing.T) {
			// An existing volume, so that only volume_path is wrong.
			id := s.missingVolumeID()
			if s.hasCtrl(ccCreate) {
				id = s.createVolume(t, s.createReq(s.name("nexpnopath"))).GetVolumeId()
			}
			req := &csi.NodeExpandVolumeRequest{VolumeId: id, VolumeCapability: s.volCap(sw)}
			_, err := call(s, s.node.NodeExpandVolume, req)
			wantCode(t, "NodeExpandVolume", req, err, rule("NodeExpandVolume", "volume_path is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
		})
		s.run(t, "unknown_volume", func(t *testing.T) {
			_, target := s.caseDir(t)
			req := &csi.NodeExpandVolumeRequest{VolumeId: s.missingVolumeID(), VolumePath: target, VolumeCapability: s.volCap(sw)}
			_, err := call(s, s.node.NodeExpandVolume, req)
			wantCode(t, "NodeExpandVolume", req, err, rule("NodeExpandVolume", "the volume does not exist → NOT_FOUND"), codes.NotFound)
		})
		s.run(t, "after_publish", func(t *testing.T) {
			s.needCtrl(t, ccCreate)
			expandPublished(t, s)
		})
	})
}

// expandPublished creates and publishes a volume, expands it on the
// controller (if it can) and the node, and returns the published volume
// with the node-side capacity before and after.
func expandPublished(t *testing.T, s *suite) (m *mounted, before, after int64) {
	t.Helper()
	v := s.createVolume(t, s.createReq(s.name("nexp")))
	if s.expansion == csi.PluginCapability_VolumeExpansion_OFFLINE {
		s.controllerExpand(t, v)
	}
	m = s.mountVolume(t, v, false)
	before, err := s.cfg.NodeFS.Capacity(m.target)
	if err != nil {
		t.Fatalf("reading the capacity at %s before expansion: %v", m.target, err)
	}
	if s.expansion != csi.PluginCapability_VolumeExpansion_OFFLINE {
		s.controllerExpand(t, v)
	}
	req := &csi.NodeExpandVolumeRequest{
		VolumeId: v.GetVolumeId(), VolumePath: m.target, StagingTargetPath: m.staging,
		CapacityRange: &csi.CapacityRange{RequiredBytes: s.cfg.ExpandSize}, VolumeCapability: m.cap, Secrets: s.cfg.Secrets,
	}
	resp, err := retry(s, s.node.NodeExpandVolume, req)
	must(t, "NodeExpandVolume", req, err, rule("NodeExpandVolume", "expanding a published volume MUST succeed"))
	if c := resp.GetCapacityBytes(); c != 0 {
		expect(t, c >= s.cfg.ExpandSize, "NodeExpandVolume", req, rule("NodeExpandVolume", "capacity_bytes, when set, is at least required_bytes"), "capacity_bytes %d, want >= %d", c, s.cfg.ExpandSize)
	}
	after, err = s.cfg.NodeFS.Capacity(m.target)
	if err != nil {
		t.Fatalf("reading the capacity at %s after expansion: %v", m.target, err)
	}
	return m, before, after
}

// controllerExpand expands v on the controller when the driver can.
func (s *suite) controllerExpand(t *testing.T, v *csi.Volume) {
	t.Helper()
	if !s.hasCtrl(ccExpand) {
		return
	}
	req := &csi.ControllerExpandVolumeRequest{VolumeId: v.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: s.cfg.ExpandSize}, VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
	_, err := retry(s, s.ctl.ControllerExpandVolume, req)
	must(t, "ControllerExpandVolume", req, err, rule("ControllerExpandVolume", "expanding to a supported size MUST succeed"))
}

// modifyCases covers ControllerModifyVolume.
func modifyCases(t *testing.T, s *suite) {
	s.needCtrl(t, ccCreate, ccModify)
	s.run(t, "missing_volume_id", func(t *testing.T) {
		req := &csi.ControllerModifyVolumeRequest{MutableParameters: s.cfg.MutableParameters, Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ControllerModifyVolume, req)
		wantCode(t, "ControllerModifyVolume", req, err, rule("ControllerModifyVolume", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "unknown_volume", func(t *testing.T) {
		req := &csi.ControllerModifyVolumeRequest{VolumeId: s.missingVolumeID(), MutableParameters: s.cfg.MutableParameters, Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ControllerModifyVolume, req)
		wantCode(t, "ControllerModifyVolume", req, err, rule("ControllerModifyVolume", "the volume does not exist → NOT_FOUND"), codes.NotFound)
	})
	for _, withClass := range []bool{false, true} {
		suffix := "created_without_mutable_parameters"
		if withClass {
			suffix = "created_with_mutable_parameters"
		}
		s.run(t, "unsupported_parameter/"+suffix, func(t *testing.T) {
			if withClass && len(s.cfg.MutableParameters) == 0 {
				t.Skip("no Config.MutableParameters")
			}
			cr := s.createReq(s.name("modbad"))
			if withClass {
				cr.MutableParameters = s.cfg.MutableParameters
			}
			v := s.createVolume(t, cr)
			req := &csi.ControllerModifyVolumeRequest{VolumeId: v.GetVolumeId(), MutableParameters: map[string]string{"sanity.csikit.dev/unsupported": "x"}, Secrets: s.cfg.Secrets}
			_, err := call(s, s.ctl.ControllerModifyVolume, req)
			wantCode(t, "ControllerModifyVolume", req, err, rule("ControllerModifyVolume", "a mutable parameter the plugin does not support → INVALID_ARGUMENT"), codes.InvalidArgument)
		})
		s.run(t, "modifies/"+suffix, func(t *testing.T) {
			if len(s.cfg.MutableParameters) == 0 {
				t.Skip("no Config.MutableParameters the driver accepts")
			}
			cr := s.createReq(s.name("mod"))
			if withClass {
				cr.MutableParameters = s.cfg.MutableParameters
			}
			v := s.createVolume(t, cr)
			req := &csi.ControllerModifyVolumeRequest{VolumeId: v.GetVolumeId(), MutableParameters: s.cfg.MutableParameters, Secrets: s.cfg.Secrets}
			_, err := retry(s, s.ctl.ControllerModifyVolume, req)
			must(t, "ControllerModifyVolume", req, err, rule("ControllerModifyVolume", "supported mutable parameters MUST be applied"))
		})
	}
}

// groupCases covers the GroupController service's request checks.
func groupCases(t *testing.T, s *suite) {
	if !s.plugin[csi.PluginCapability_Service_GROUP_CONTROLLER_SERVICE] {
		t.Skip("driver does not advertise GROUP_CONTROLLER_SERVICE")
	}
	s.run(t, "GroupControllerGetCapabilities/known_values", func(t *testing.T) {
		req := &csi.GroupControllerGetCapabilitiesRequest{}
		resp, err := call(s, s.grp.GroupControllerGetCapabilities, req)
		must(t, "GroupControllerGetCapabilities", req, err, rule("GroupControllerGetCapabilities", "a group controller plugin MUST implement it"))
		for _, c := range resp.GetCapabilities() {
			expect(t, c.GetRpc().GetType() == csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT, "GroupControllerGetCapabilities", req,
				rule("GroupControllerGetCapabilities", "capabilities are values the spec defines"), "capability %v, want a defined one", c.GetRpc().GetType())
		}
	})
	if !s.grpCaps[csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT] {
		return
	}
	s.run(t, "CreateVolumeGroupSnapshot/missing_name", func(t *testing.T) {
		req := &csi.CreateVolumeGroupSnapshotRequest{SourceVolumeIds: []string{s.missingVolumeID()}, Secrets: s.cfg.Secrets}
		_, err := call(s, s.grp.CreateVolumeGroupSnapshot, req)
		wantCode(t, "CreateVolumeGroupSnapshot", req, err, rule("CreateVolumeGroupSnapshot", "name is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "GetVolumeGroupSnapshot/missing_id", func(t *testing.T) {
		req := &csi.GetVolumeGroupSnapshotRequest{Secrets: s.cfg.Secrets}
		_, err := call(s, s.grp.GetVolumeGroupSnapshot, req)
		wantCode(t, "GetVolumeGroupSnapshot", req, err, rule("GetVolumeGroupSnapshot", "group_snapshot_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "GetVolumeGroupSnapshot/unknown_id", func(t *testing.T) {
		req := &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "sanity-missing-group-" + s.runID, Secrets: s.cfg.Secrets}
		_, err := call(s, s.grp.GetVolumeGroupSnapshot, req)
		wantCode(t, "GetVolumeGroupSnapshot", req, err, rule("GetVolumeGroupSnapshot", "the group snapshot does not exist → NOT_FOUND"), codes.NotFound)
	})
	s.run(t, "DeleteVolumeGroupSnapshot/missing_id", func(t *testing.T) {
		req := &csi.DeleteVolumeGroupSnapshotRequest{Secrets: s.cfg.Secrets}
		_, err := call(s, s.grp.DeleteVolumeGroupSnapshot, req)
		wantCode(t, "DeleteVolumeGroupSnapshot", req, err, rule("DeleteVolumeGroupSnapshot", "group_snapshot_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "DeleteVolumeGroupSnapshot/unknown_id", func(t *testing.T) {
		req := &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "sanity-missing-group-" + s.runID, Secrets: s.cfg.Secrets}
		_, err := call(s, s.grp.DeleteVolumeGroupSnapshot, req)
		must(t, "DeleteVolumeGroupSnapshot", req, err, rule("DeleteVolumeGroupSnapshot", "a group snapshot that does not exist counts as deleted → OK"))
	})
}

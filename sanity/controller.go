package sanity

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const (
	ccCreate  = csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME
	ccPublish = csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME
	ccList    = csi.ControllerServiceCapability_RPC_LIST_VOLUMES
	ccCap     = csi.ControllerServiceCapability_RPC_GET_CAPACITY
	ccSnap    = csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT
	ccListSn  = csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS
	ccClone   = csi.ControllerServiceCapability_RPC_CLONE_VOLUME
	ccRO      = csi.ControllerServiceCapability_RPC_PUBLISH_READONLY
	ccExpand  = csi.ControllerServiceCapability_RPC_EXPAND_VOLUME
	ccModify  = csi.ControllerServiceCapability_RPC_MODIFY_VOLUME
	ccSNMW    = csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER
)

// controllerCases covers the Controller service's volume RPCs.
func controllerCases(t *testing.T, s *suite) {
	s.run(t, "ControllerGetCapabilities/known_values", func(t *testing.T) {
		s.needCtrl(t)
		req := &csi.ControllerGetCapabilitiesRequest{}
		resp, err := call(s, s.ctl.ControllerGetCapabilities, req)
		must(t, "ControllerGetCapabilities", req, err, rule("ControllerGetCapabilities", "a controller plugin MUST implement it"))
		for _, c := range resp.GetCapabilities() {
			ty := c.GetRpc().GetType()
			expect(t, ty != csi.ControllerServiceCapability_RPC_UNKNOWN && csi.ControllerServiceCapability_RPC_Type_name[int32(ty)] != "",
				"ControllerGetCapabilities", req, rule("ControllerGetCapabilities", "capabilities are values the spec defines"), "capability %v, want a defined one", ty)
		}
	})
	s.run(t, "GetCapacity/no_parameters", func(t *testing.T) {
		s.needCtrl(t, ccCap)
		req := &csi.GetCapacityRequest{}
		resp, err := call(s, s.ctl.GetCapacity, req)
		must(t, "GetCapacity", req, err, rule("GetCapacity", "all fields are OPTIONAL; an empty request asks for the total available capacity"))
		expect(t, resp.GetAvailableCapacity() >= 0, "GetCapacity", req, rule("GetCapacity", "available_capacity MUST NOT be negative"), "available_capacity %d, want >= 0", resp.GetAvailableCapacity())
	})
	s.run(t, "CreateVolume", func(t *testing.T) { s.needCtrl(t, ccCreate); createVolumeCases(t, s) })
	s.run(t, "DeleteVolume", func(t *testing.T) { s.needCtrl(t, ccCreate); deleteVolumeCases(t, s) })
	s.run(t, "ValidateVolumeCapabilities", func(t *testing.T) { s.needCtrl(t, ccCreate); validateCases(t, s) })
	s.run(t, "ListVolumes", func(t *testing.T) { s.needCtrl(t, ccCreate, ccList); listVolumeCases(t, s) })
	s.run(t, "ControllerPublishVolume", func(t *testing.T) { s.needCtrl(t, ccCreate, ccPublish); controllerPublishCases(t, s) })
}

func createVolumeCases(t *testing.T, s *suite) {
	s.run(t, "missing_name", func(t *testing.T) {
		req := s.createReq("")
		_, err := call(s, s.ctl.CreateVolume, req)
		wantCode(t, "CreateVolume", req, err, rule("CreateVolume", "name is REQUIRED; a missing required field → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "missing_capabilities", func(t *testing.T) {
		req := s.createReq(s.name("nocaps"))
		req.VolumeCapabilities = nil
		_, err := call(s, s.ctl.CreateVolume, req)
		wantCode(t, "CreateVolume", req, err, rule("CreateVolume", "volume_capabilities is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "no_capacity", func(t *testing.T) {
		req := s.createReq(s.name("nocap"))
		req.CapacityRange = nil
		s.createVolume(t, req)
	})
	s.run(t, "with_capacity", func(t *testing.T) {
		req := s.createReq(s.name("cap"))
		v := s.createVolume(t, req)
		expect(t, v.GetCapacityBytes() == 0 || v.GetCapacityBytes() >= req.CapacityRange.RequiredBytes, "CreateVolume", req,
			rule("CreateVolume", "capacity_bytes is at least required_bytes, or 0 when unknown"), "capacity_bytes %d, want >= %d", v.GetCapacityBytes(), req.CapacityRange.RequiredBytes)
	})
	s.run(t, "same_name_same_request", func(t *testing.T) {
		req := s.createReq(s.name("twice"))
		v := s.createVolume(t, req)
		for range s.cfg.IdempotentCount {
			resp, err := retry(s, s.ctl.CreateVolume, req)
			must(t, "CreateVolume (repeat)", req, err, rule("CreateVolume", "a repeated identical request MUST succeed and return the existing volume (idempotency)"))
			expect(t, resp.GetVolume().GetVolumeId() == v.GetVolumeId(), "CreateVolume (repeat)", req,
				rule("CreateVolume", "a repeated request for an existing name returns the same volume"), "volume_id %q, want %q", resp.GetVolume().GetVolumeId(), v.GetVolumeId())
			if id := resp.GetVolume().GetVolumeId(); id != v.GetVolumeId() && id != "" {
				s.deleteOnCleanup(t, id)
			}
		}
	})
	s.run(t, "same_name_different_capacity", func(t *testing.T) {
		req := s.createReq(s.name("twicediff"))
		req.CapacityRange.LimitBytes = s.cfg.VolumeSize
		s.createVolume(t, req)
		req2 := proto.Clone(req).(*csi.CreateVolumeRequest)
		req2.CapacityRange = &csi.CapacityRange{RequiredBytes: 2 * s.cfg.VolumeSize, LimitBytes: 2 * s.cfg.VolumeSize}
		resp, err := call(s, s.ctl.CreateVolume, req2)
		if err == nil {
			s.deleteOnCleanup(t, resp.GetVolume().GetVolumeId())
		}
		wantCode(t, "CreateVolume", req2, err, rule("CreateVolume", "a volume with this name exists but is incompatible → ALREADY_EXISTS"), codes.AlreadyExists)
	})
	s.run(t, "max_length_name", func(t *testing.T) {
		s.createVolume(t, s.createReq(s.longName(128)))
	})
	s.run(t, "impossible_capacity", func(t *testing.T) {
		req := s.createReq(s.name("huge"))
		req.CapacityRange = &csi.CapacityRange{RequiredBytes: 1 << 62, LimitBytes: 1 << 62}
		resp, err := call(s, s.ctl.CreateVolume, req)
		if err == nil {
			s.deleteOnCleanup(t, resp.GetVolume().GetVolumeId())
		}
		wantCode(t, "CreateVolume", req, err, rule("CreateVolume", "an unsupported capacity_range → OUT_OF_RANGE"), codes.OutOfRange)
	})
	s.run(t, "unsupported_access_mode", func(t *testing.T) {
		modes := s.unsupportedModes()
		if len(modes) == 0 {
			t.Skip("no access mode known to be unsupported (set Config.UnsupportedAccessModes)")
		}
		for _, m := range modes {
			req := s.createReq(s.name("badmode"))
			req.VolumeCapabilities = []*csi.VolumeCapability{s.volCap(m)}
			resp, err := call(s, s.ctl.CreateVolume, req)
			if err == nil {
				s.deleteOnCleanup(t, resp.GetVolume().GetVolumeId())
			}
			wantCode(t, "CreateVolume", req, err, rule("CreateVolume", "a capability the plugin does not support → INVALID_ARGUMENT"), codes.InvalidArgument)
		}
	})
	s.run(t, "from_snapshot", func(t *testing.T) {
		s.needCtrl(t, ccSnap)
		src := s.createVolume(t, s.createReq(s.name("snapsrc")))
		snap := s.createSnapshot(t, s.name("snap"), src.GetVolumeId())
		req := s.createReq(s.name("fromsnap"))
		req.VolumeContentSource = snapSource(snap.GetSnapshotId())
		v := s.createVolume(t, req)
		expect(t, proto.Equal(v.GetContentSource(), req.VolumeContentSource), "CreateVolume", req,
			rule("CreateVolume", "content_source in the response MUST be the source the volume was created from"), "content_source %v, want %v", v.GetContentSource(), req.VolumeContentSource)
	})
	s.run(t, "from_missing_snapshot", func(t *testing.T) {
		s.needCtrl(t, ccSnap)
		req := s.createReq(s.name("frommissing"))
		req.VolumeContentSource = snapSource("sanity-missing-snapshot-" + s.runID)
		resp, err := call(s, s.ctl.CreateVolume, req)
		if err == nil {
			s.deleteOnCleanup(t, resp.GetVolume().GetVolumeId())
		}
		wantCode(t, "CreateVolume", req, err, rule("CreateVolume", "the source snapshot does not exist → NOT_FOUND"), codes.NotFound)
	})
	s.run(t, "clone", func(t *testing.T) {
		s.needCtrl(t, ccClone)
		src := s.createVolume(t, s.createReq(s.name("clonesrc")))
		req := s.createReq(s.name("clone"))
		req.VolumeContentSource = volSource(src.GetVolumeId())
		v := s.createVolume(t, req)
		expect(t, proto.Equal(v.GetContentSource(), req.VolumeContentSource), "CreateVolume", req,
			rule("CreateVolume", "content_source in the response MUST be the source the volume was created from"), "content_source %v, want %v", v.GetContentSource(), req.VolumeContentSource)
	})
	s.run(t, "clone_missing_source", func(t *testing.T) {
		s.needCtrl(t, ccClone)
		req := s.createReq(s.name("clonemissing"))
		req.VolumeContentSource = volSource(s.missingVolumeID())
		resp, err := call(s, s.ctl.CreateVolume, req)
		if err == nil {
			s.deleteOnCleanup(t, resp.GetVolume().GetVolumeId())
		}
		wantCode(t, "CreateVolume", req, err, rule("CreateVolume", "the source volume does not exist → NOT_FOUND"), codes.NotFound)
	})
	s.run(t, "source_of_other_access_type", func(t *testing.T) {
		if s.cfg.AccessType != BothAccess {
			t.Skip("needs Config.AccessType BothAccess: a block source for a mount volume and back")
		}
		other := BlockAccess
		if s.access == BlockAccess {
			other = MountAccess
		}
		for _, kind := range []string{"clone", "snapshot"} {
			if kind == "clone" && !s.hasCtrl(ccClone) || kind == "snapshot" && !s.hasCtrl(ccSnap) {
				continue
			}
			src := s.createVolume(t, s.createReq(s.name("xsrc")))
			req := s.createReq(s.name("xtype"))
			req.VolumeCapabilities = []*csi.VolumeCapability{capOf(other, s.cfg.FsType, sw)}
			req.VolumeContentSource = volSource(src.GetVolumeId())
			if kind == "snapshot" {
				req.VolumeContentSource = snapSource(s.createSnapshot(t, s.name("xsnap"), src.GetVolumeId()).GetSnapshotId())
			}
			resp, err := call(s, s.ctl.CreateVolume, req)
			if err == nil {
				s.deleteOnCleanup(t, resp.GetVolume().GetVolumeId())
			}
			wantCode(t, "CreateVolume", req, err, rule("CreateVolume", "a source incompatible with the requested volume (block vs mount) → INVALID_ARGUMENT"), codes.InvalidArgument)
		}
	})
}

func snapSource(id string) *csi.VolumeContentSource {
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: id}}}
}

func volSource(id string) *csi.VolumeContentSource {
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}
}

// unsupportedModes are the access modes CreateVolume must refuse.
func (s *suite) unsupportedModes() []csi.VolumeCapability_AccessMode_Mode {
	modes := append([]csi.VolumeCapability_AccessMode_Mode(nil), s.cfg.UnsupportedAccessModes...)
	if !s.hasCtrl(ccSNMW) {
		modes = append(modes, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER)
	}
	return modes
}

func deleteVolumeCases(t *testing.T, s *suite) {
	s.run(t, "missing_id", func(t *testing.T) {
		req := &csi.DeleteVolumeRequest{Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.DeleteVolume, req)
		wantCode(t, "DeleteVolume", req, err, rule("DeleteVolume", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "unknown_id", func(t *testing.T) {
		req := &csi.DeleteVolumeRequest{VolumeId: s.missingVolumeID(), Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.DeleteVolume, req)
		must(t, "DeleteVolume", req, err, rule("DeleteVolume", "a volume that does not exist counts as deleted → OK"))
	})
	s.run(t, "twice", func(t *testing.T) {
		resp, err := retry(s, s.ctl.CreateVolume, s.createReq(s.name("del")))
		must(t, "CreateVolume", nil, err, "")
		req := &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: s.cfg.Secrets}
		for i := 0; i <= s.cfg.IdempotentCount; i++ {
			_, err := retry(s, s.ctl.DeleteVolume, req)
			must(t, "DeleteVolume", req, err, rule("DeleteVolume", "deleting a volume MUST succeed, and again once it is gone (idempotency)"))
		}
	})
}

func validateCases(t *testing.T, s *suite) {
	s.run(t, "missing_id", func(t *testing.T) {
		req := &csi.ValidateVolumeCapabilitiesRequest{VolumeCapabilities: []*csi.VolumeCapability{s.volCap(sw)}, Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ValidateVolumeCapabilities, req)
		wantCode(t, "ValidateVolumeCapabilities", req, err, rule("ValidateVolumeCapabilities", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "missing_capabilities", func(t *testing.T) {
		v := s.createVolume(t, s.createReq(s.name("valnocap")))
		req := &csi.ValidateVolumeCapabilitiesRequest{VolumeId: v.GetVolumeId(), Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ValidateVolumeCapabilities, req)
		wantCode(t, "ValidateVolumeCapabilities", req, err, rule("ValidateVolumeCapabilities", "volume_capabilities is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "confirms_creation_capabilities", func(t *testing.T) {
		v := s.createVolume(t, s.createReq(s.name("val")))
		req := &csi.ValidateVolumeCapabilitiesRequest{VolumeId: v.GetVolumeId(), VolumeCapabilities: []*csi.VolumeCapability{s.volCap(sw)}, VolumeContext: v.GetVolumeContext(), Parameters: s.cfg.Parameters, Secrets: s.cfg.Secrets}
		resp, err := call(s, s.ctl.ValidateVolumeCapabilities, req)
		must(t, "ValidateVolumeCapabilities", req, err, rule("ValidateVolumeCapabilities", "MUST succeed for an existing volume"))
		expect(t, len(resp.GetConfirmed().GetVolumeCapabilities()) > 0, "ValidateVolumeCapabilities", req,
			rule("ValidateVolumeCapabilities", "confirmed is set, with the capabilities, when they are supported — and the volume was created with them"), "confirmed %v, want the requested capabilities", resp.GetConfirmed())
	})
	s.run(t, "unsupported_mode_not_confirmed", func(t *testing.T) {
		modes := s.unsupportedModes()
		if len(modes) == 0 {
			t.Skip("no access mode known to be unsupported")
		}
		v := s.createVolume(t, s.createReq(s.name("valbad")))
		req := &csi.ValidateVolumeCapabilitiesRequest{VolumeId: v.GetVolumeId(), VolumeCapabilities: []*csi.VolumeCapability{s.volCap(modes[0])}, Secrets: s.cfg.Secrets}
		resp, err := call(s, s.ctl.ValidateVolumeCapabilities, req)
		if status.Code(err) == codes.InvalidArgument {
			return
		}
		must(t, "ValidateVolumeCapabilities", req, err, rule("ValidateVolumeCapabilities", "unsupported capabilities are answered with an empty confirmed, not an error"))
		expect(t, resp.GetConfirmed() == nil, "ValidateVolumeCapabilities", req,
			rule("ValidateVolumeCapabilities", "confirmed SHALL be set only if all capabilities are supported"), "confirmed %v, want none", resp.GetConfirmed())
	})
	s.run(t, "unknown_volume", func(t *testing.T) {
		req := &csi.ValidateVolumeCapabilitiesRequest{VolumeId: s.missingVolumeID(), VolumeCapabilities: []*csi.VolumeCapability{s.volCap(sw)}, Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ValidateVolumeCapabilities, req)
		wantCode(t, "ValidateVolumeCapabilities", req, err, rule("ValidateVolumeCapabilities", "the volume does not exist → NOT_FOUND"), codes.NotFound)
	})
}

package sanity

import (
	"maps"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// controllerPublishCases covers ControllerPublishVolume and
// ControllerUnpublishVolume.
func controllerPublishCases(t *testing.T, s *suite) {
	nodeID := func(t *testing.T) string {
		if s.nodeInfo.GetNodeId() == "" {
			t.Skip("no node service to take a node ID from")
		}
		return s.nodeInfo.GetNodeId()
	}
	s.run(t, "missing_volume_id", func(t *testing.T) {
		req := &csi.ControllerPublishVolumeRequest{NodeId: "node", VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ControllerPublishVolume, req)
		wantCode(t, "ControllerPublishVolume", req, err, rule("ControllerPublishVolume", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "missing_node_id", func(t *testing.T) {
		req := &csi.ControllerPublishVolumeRequest{VolumeId: s.missingVolumeID(), VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ControllerPublishVolume, req)
		wantCode(t, "ControllerPublishVolume", req, err, rule("ControllerPublishVolume", "node_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "missing_capability", func(t *testing.T) {
		req := &csi.ControllerPublishVolumeRequest{VolumeId: s.missingVolumeID(), NodeId: "node", Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ControllerPublishVolume, req)
		wantCode(t, "ControllerPublishVolume", req, err, rule("ControllerPublishVolume", "volume_capability is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "unknown_volume", func(t *testing.T) {
		req := &csi.ControllerPublishVolumeRequest{VolumeId: s.missingVolumeID(), NodeId: nodeID(t), VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ControllerPublishVolume, req)
		wantCode(t, "ControllerPublishVolume", req, err, rule("ControllerPublishVolume", "the volume does not exist → NOT_FOUND"), codes.NotFound)
	})
	s.run(t, "unknown_node", func(t *testing.T) {
		v := s.createVolume(t, s.createReq(s.name("cpnode")))
		req := &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: "sanity-missing-node-" + s.runID, VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ControllerPublishVolume, req)
		wantCode(t, "ControllerPublishVolume", req, err, rule("ControllerPublishVolume", "the node does not exist → NOT_FOUND"), codes.NotFound)
	})
	s.run(t, "incompatible_republish", func(t *testing.T) {
		s.needCtrl(t, ccRO)
		v := s.createVolume(t, s.createReq(s.name("cpro")))
		nodeID(t)
		s.controllerPublish(t, v, s.volCap(sw), false)
		req := &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: nodeID(t), VolumeCapability: s.volCap(sw), Readonly: true, Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ControllerPublishVolume, req)
		wantCode(t, "ControllerPublishVolume", req, err, rule("ControllerPublishVolume", "published to the node with an incompatible readonly flag → ALREADY_EXISTS"), codes.AlreadyExists)
	})
	s.run(t, "idempotent", func(t *testing.T) {
		v := s.createVolume(t, s.createReq(s.name("cpidem")))
		nodeID(t)
		first := s.controllerPublish(t, v, s.volCap(sw), false)
		req := &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: nodeID(t), VolumeCapability: s.volCap(sw), VolumeContext: v.GetVolumeContext(), Secrets: s.cfg.Secrets}
		for range s.cfg.IdempotentCount {
			resp, err := retry(s, s.ctl.ControllerPublishVolume, req)
			must(t, "ControllerPublishVolume (repeat)", req, err, rule("ControllerPublishVolume", "publishing an already published volume compatibly MUST succeed (idempotency)"))
			expect(t, maps.Equal(resp.GetPublishContext(), first), "ControllerPublishVolume (repeat)", req,
				rule("ControllerPublishVolume", "an already published, compatible volume MUST be answered OK")+"; "+
					kube("external-attacher", "kubelet stages with the publish_context recorded from an answer; a retry answering another one leaves node and controller disagreeing"), "publish_context %v, want %v", resp.GetPublishContext(), first)
		}
	})
	s.run(t, "attach_limit", func(t *testing.T) {
		if !s.cfg.TestAttachLimit {
			t.Skip("Config.TestAttachLimit is off")
		}
		max := s.nodeInfo.GetMaxVolumesPerNode()
		if max <= 0 {
			t.Skip("NodeGetInfo sets no max_volumes_per_node")
		}
		for range max {
			s.controllerPublish(t, s.createVolume(t, s.createReq(s.name("limit"))), s.volCap(sw), false)
		}
		v := s.createVolume(t, s.createReq(s.name("limit")))
		req := &csi.ControllerPublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: nodeID(t), VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ControllerPublishVolume, req)
		wantCode(t, "ControllerPublishVolume", req, err, rule("ControllerPublishVolume", "more volumes than max_volumes_per_node on one node → RESOURCE_EXHAUSTED"), codes.ResourceExhausted)
	})
	s.run(t, "Unpublish/missing_volume_id", func(t *testing.T) {
		req := &csi.ControllerUnpublishVolumeRequest{NodeId: "node", Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ControllerUnpublishVolume, req)
		wantCode(t, "ControllerUnpublishVolume", req, err, rule("ControllerUnpublishVolume", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "Unpublish/not_published", func(t *testing.T) {
		v := s.createVolume(t, s.createReq(s.name("cpnot")))
		req := &csi.ControllerUnpublishVolumeRequest{VolumeId: v.GetVolumeId(), NodeId: nodeID(t), Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ControllerUnpublishVolume, req)
		must(t, "ControllerUnpublishVolume", req, err, rule("ControllerUnpublishVolume", "a volume not published to the node counts as unpublished → OK"))
	})
	s.run(t, "Unpublish/unknown_volume", func(t *testing.T) {
		req := &csi.ControllerUnpublishVolumeRequest{VolumeId: s.missingVolumeID(), NodeId: nodeID(t), Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ControllerUnpublishVolume, req)
		if c := status.Code(err); c != codes.OK && c != codes.NotFound {
			t.Error(describe("ControllerUnpublishVolume", req, err, "OK or NotFound", rule("ControllerUnpublishVolume", "a volume that cannot be found SHOULD count as unpublished → OK, else NOT_FOUND")))
		}
	})
}

// listVolumeCases covers ListVolumes without pagination.
func listVolumeCases(t *testing.T, s *suite) {
	s.run(t, "entries_valid", func(t *testing.T) {
		s.createVolume(t, s.createReq(s.name("list")))
		req := &csi.ListVolumesRequest{}
		resp, err := call(s, s.ctl.ListVolumes, req)
		must(t, "ListVolumes", req, err, rule("ListVolumes", "MUST succeed for a plugin advertising LIST_VOLUMES"))
		for _, e := range resp.GetEntries() {
			expect(t, e.GetVolume().GetVolumeId() != "", "ListVolumes", req, rule("ListVolumes", "every entry has a volume with a volume_id"), "entry %v, want a volume_id", e)
		}
	})
	s.run(t, "invalid_starting_token", func(t *testing.T) {
		req := &csi.ListVolumesRequest{StartingToken: "sanity-invalid-token"}
		_, err := call(s, s.ctl.ListVolumes, req)
		wantCode(t, "ListVolumes", req, err, rule("ListVolumes", "a starting_token the plugin cannot use → ABORTED"), codes.Aborted)
	})
	s.run(t, "created_listed_deleted_gone", func(t *testing.T) {
		resp, err := retry(s, s.ctl.CreateVolume, s.createReq(s.name("listdel")))
		must(t, "CreateVolume", nil, err, "")
		id := resp.GetVolume().GetVolumeId()
		s.deleteOnCleanup(t, id)
		req := &csi.ListVolumesRequest{}
		ids, err := s.allVolumeIDs(req)
		must(t, "ListVolumes", req, err, rule("ListVolumes", "MUST succeed"))
		expect(t, ids[id] == 1, "ListVolumes", req, rule("ListVolumes", "lists every volume the plugin has, exactly once"), "volume %s listed %d times, want once", id, ids[id])
		dreq := &csi.DeleteVolumeRequest{VolumeId: id, Secrets: s.cfg.Secrets}
		_, err = retry(s, s.ctl.DeleteVolume, dreq)
		must(t, "DeleteVolume", dreq, err, rule("DeleteVolume", "MUST succeed"))
		ids, err = s.allVolumeIDs(req)
		must(t, "ListVolumes", req, err, rule("ListVolumes", "MUST succeed"))
		expect(t, ids[id] == 0, "ListVolumes", req, rule("ListVolumes", "a deleted volume is no longer listed"), "deleted volume %s listed, want it gone", id)
	})
}

// allVolumeIDs follows ListVolumes pages from req and counts each ID.
func (s *suite) allVolumeIDs(req *csi.ListVolumesRequest) (map[string]int, error) {
	ids := map[string]int{}
	q := &csi.ListVolumesRequest{MaxEntries: req.MaxEntries, StartingToken: req.StartingToken}
	for range 10000 {
		resp, err := retry(s, s.ctl.ListVolumes, q)
		if err != nil {
			return ids, err
		}
		for _, e := range resp.GetEntries() {
			ids[e.GetVolume().GetVolumeId()]++
		}
		if resp.GetNextToken() == "" {
			return ids, nil
		}
		q = &csi.ListVolumesRequest{MaxEntries: req.MaxEntries, StartingToken: resp.GetNextToken()}
	}
	return ids, status.Error(codes.Internal, "ListVolumes: more than 10000 pages")
}

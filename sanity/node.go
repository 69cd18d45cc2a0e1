package sanity

import (
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	ncStage   = csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME
	ncStats   = csi.NodeServiceCapability_RPC_GET_VOLUME_STATS
	ncExpand  = csi.NodeServiceCapability_RPC_EXPAND_VOLUME
	ncSNMW    = csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER
	ncHealth  = csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH
	ncStorage = csi.NodeServiceCapability_RPC_GET_STORAGE_HEALTH
)

// nodeCases covers the Node service.
func nodeCases(t *testing.T, s *suite) {
	s.run(t, "NodeGetCapabilities/known_values", func(t *testing.T) {
		s.needNode(t)
		req := &csi.NodeGetCapabilitiesRequest{}
		resp, err := call(s, s.node.NodeGetCapabilities, req)
		must(t, "NodeGetCapabilities", req, err, rule("NodeGetCapabilities", "a node plugin MUST implement it"))
		for _, c := range resp.GetCapabilities() {
			ty := c.GetRpc().GetType()
			expect(t, csi.NodeServiceCapability_RPC_Type_name[int32(ty)] != "", "NodeGetCapabilities", req,
				rule("NodeGetCapabilities", "capabilities are values the spec defines"), "capability %v, want a defined one", ty)
		}
	})
	s.run(t, "NodeGetInfo/valid", func(t *testing.T) {
		s.needNode(t)
		req := &csi.NodeGetInfoRequest{}
		resp, err := call(s, s.node.NodeGetInfo, req)
		must(t, "NodeGetInfo", req, err, rule("NodeGetInfo", "a node plugin MUST implement it"))
		expect(t, resp.GetNodeId() != "", "NodeGetInfo", req, rule("NodeGetInfo", "node_id is REQUIRED"), "an empty node_id, want one")
		expect(t, resp.GetMaxVolumesPerNode() >= 0, "NodeGetInfo", req, rule("NodeGetInfo", "max_volumes_per_node MUST NOT be negative"), "max_volumes_per_node %d, want >= 0", resp.GetMaxVolumesPerNode())
		if s.plugin[csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS] {
			expect(t, resp.GetAccessibleTopology() != nil, "NodeGetInfo", req,
				rule("NodeGetInfo", "a plugin with VOLUME_ACCESSIBILITY_CONSTRAINTS reports accessible_topology"), "no accessible_topology, want one")
		}
	})
	s.run(t, "NodePublishVolume", func(t *testing.T) { s.needNode(t); nodePublishCases(t, s) })
	s.run(t, "NodeUnpublishVolume", func(t *testing.T) { s.needNode(t); nodeUnpublishCases(t, s) })
	s.run(t, "NodeStageVolume", func(t *testing.T) { s.needNode(t, ncStage); nodeStageCases(t, s) })
	s.run(t, "NodeGetVolumeStats", func(t *testing.T) { s.needNode(t, ncStats); statsCases(t, s) })
	s.run(t, "NodeGetVolumeHealth", func(t *testing.T) { s.needNode(t, ncHealth); healthCases(t, s) })
	s.run(t, "NodeGetStorageHealth/answers", func(t *testing.T) {
		s.needNode(t, ncStorage)
		req := &csi.NodeGetStorageHealthRequest{}
		_, err := call(s, s.node.NodeGetStorageHealth, req)
		must(t, "NodeGetStorageHealth", req, err, rule("NodeGetStorageHealth", "MUST succeed for a plugin advertising GET_STORAGE_HEALTH"))
	})
	s.run(t, "lifecycle/works", func(t *testing.T) {
		s.needNode(t)
		s.needCtrl(t, ccCreate)
		m := s.mountVolume(t, s.createVolume(t, s.createReq(s.name("life"))), false)
		ok, err := s.cfg.NodeFS.Exists(m.target)
		expect(t, err == nil && ok, "NodePublishVolume", s.publishReq(m, false), rule("NodePublishVolume", "the SP places the mounted directory or block device at target_path"),
			"target_path missing after publish (%v), want it present", err)
	})
	s.run(t, "lifecycle/idempotent", func(t *testing.T) {
		s.needNode(t)
		s.needCtrl(t, ccCreate)
		m := s.mountVolume(t, s.createVolume(t, s.createReq(s.name("lifeidem"))), false)
		for range s.cfg.IdempotentCount {
			if m.staging != "" {
				req := s.stageReq(m)
				_, err := retry(s, s.node.NodeStageVolume, req)
				must(t, "NodeStageVolume (repeat)", req, err, rule("NodeStageVolume", "staging an already staged volume compatibly MUST succeed (idempotency)"))
			}
			req := s.publishReq(m, false)
			_, err := retry(s, s.node.NodePublishVolume, req)
			must(t, "NodePublishVolume (repeat)", req, err, rule("NodePublishVolume", "publishing an already published volume compatibly MUST succeed (idempotency)"))
		}
		for range s.cfg.IdempotentCount {
			s.unpublish(t, m)
		}
		ok, err := s.cfg.NodeFS.Exists(m.target)
		expect(t, err == nil && !ok, "NodeUnpublishVolume", nil, rule("NodeUnpublishVolume", "the SP MUST delete the file or directory it created at target_path"), "target_path still present (%v), want it removed", err)
		if m.staging != "" {
			for range s.cfg.IdempotentCount {
				s.unstage(t, m)
			}
		}
	})
}

func nodePublishCases(t *testing.T, s *suite) {
	s.run(t, "missing_volume_id", func(t *testing.T) {
		_, target := s.caseDir(t)
		req := &csi.NodePublishVolumeRequest{TargetPath: target, VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
		_, err := call(s, s.node.NodePublishVolume, req)
		wantCode(t, "NodePublishVolume", req, err, rule("NodePublishVolume", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "missing_target_path", func(t *testing.T) {
		req := &csi.NodePublishVolumeRequest{VolumeId: s.missingVolumeID(), VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
		_, err := call(s, s.node.NodePublishVolume, req)
		wantCode(t, "NodePublishVolume", req, err, rule("NodePublishVolume", "target_path is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "missing_capability", func(t *testing.T) {
		_, target := s.caseDir(t)
		req := &csi.NodePublishVolumeRequest{VolumeId: s.missingVolumeID(), TargetPath: target, Secrets: s.cfg.Secrets}
		_, err := call(s, s.node.NodePublishVolume, req)
		wantCode(t, "NodePublishVolume", req, err, rule("NodePublishVolume", "volume_capability is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "unknown_volume", func(t *testing.T) {
		staging, target := s.caseDir(t)
		req := &csi.NodePublishVolumeRequest{VolumeId: s.missingVolumeID(), TargetPath: target, VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
		if s.nodeCaps[ncStage] {
			req.StagingTargetPath = staging
		}
		_, err := call(s, s.node.NodePublishVolume, req)
		wantCode(t, "NodePublishVolume", req, err, rule("NodePublishVolume", "the volume does not exist → NOT_FOUND"), codes.NotFound)
	})
	s.run(t, "missing_staging_path", func(t *testing.T) {
		s.needNode(t, ncStage)
		s.needCtrl(t, ccCreate)
		v := s.createVolume(t, s.createReq(s.name("nostg")))
		_, target := s.caseDir(t)
		m := &mounted{vol: v, cap: s.volCap(sw), target: target}
		if s.hasCtrl(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME) {
			m.pubCtx = s.controllerPublish(t, v, m.cap, false)
		}
		req := s.publishReq(m, false) // no staging_target_path
		_, err := call(s, s.node.NodePublishVolume, req)
		if err == nil {
			s.unpublish(t, m)
		}
		wantCode(t, "NodePublishVolume", req, err, rule("NodePublishVolume",
			"STAGE_UNSTAGE_VOLUME is advertised but no staging_target_path was set → FAILED_PRECONDITION"), codes.FailedPrecondition)
	})
	s.run(t, "incompatible_republish", func(t *testing.T) {
		s.needCtrl(t, ccCreate)
		m := s.mountVolume(t, s.createVolume(t, s.createReq(s.name("npro"))), false)
		req := s.publishReq(m, true)
		_, err := call(s, s.node.NodePublishVolume, req)
		wantCode(t, "NodePublishVolume", req, err, rule("NodePublishVolume", "already published at target_path with another readonly flag → ALREADY_EXISTS"), codes.AlreadyExists)
	})
	s.run(t, "not_staged", func(t *testing.T) { notStagedCase(t, s) })
	s.run(t, "conflicting_mount_flags", func(t *testing.T) { publishConflictCase(t, s) })
	s.run(t, "single_writer_second_target", func(t *testing.T) {
		s.needNode(t, ncSNMW)
		s.needCtrl(t, ccCreate)
		req := s.createReq(s.name("snsw"))
		req.VolumeCapabilities = []*csi.VolumeCapability{s.volCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER)}
		v := s.createVolume(t, req)
		m := s.mountVolume(t, v, false)
		_, other := s.caseDir(t)
		preq := s.publishReq(m, false)
		preq.TargetPath = other
		preq.VolumeCapability = req.VolumeCapabilities[0]
		_, err := call(s, s.node.NodePublishVolume, preq)
		if err == nil {
			s.unpublish(t, &mounted{vol: v, target: other})
		}
		wantCode(t, "NodePublishVolume", preq, err, rule("NodePublishVolume", "a SINGLE_NODE_SINGLE_WRITER volume published elsewhere → FAILED_PRECONDITION"), codes.FailedPrecondition)
	})
}

func nodeUnpublishCases(t *testing.T, s *suite) {
	s.run(t, "missing_volume_id", func(t *testing.T) {
		_, target := s.caseDir(t)
		req := &csi.NodeUnpublishVolumeRequest{TargetPath: target}
		_, err := call(s, s.node.NodeUnpublishVolume, req)
		wantCode(t, "NodeUnpublishVolume", req, err, rule("NodeUnpublishVolume", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "missing_target_path", func(t *testing.T) {
		req := &csi.NodeUnpublishVolumeRequest{VolumeId: s.missingVolumeID()}
		_, err := call(s, s.node.NodeUnpublishVolume, req)
		wantCode(t, "NodeUnpublishVolume", req, err, rule("NodeUnpublishVolume", "target_path is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "not_published", func(t *testing.T) {
		s.needCtrl(t, ccCreate)
		v := s.createVolume(t, s.createReq(s.name("notpub")))
		_, target := s.caseDir(t)
		req := &csi.NodeUnpublishVolumeRequest{VolumeId: v.GetVolumeId(), TargetPath: target}
		_, err := call(s, s.node.NodeUnpublishVolume, req)
		must(t, "NodeUnpublishVolume", req, err, rule("NodeUnpublishVolume", "a volume not published at target_path counts as unpublished → OK"))
	})
	s.run(t, "unknown_volume", func(t *testing.T) {
		_, target := s.caseDir(t)
		req := &csi.NodeUnpublishVolumeRequest{VolumeId: s.missingVolumeID(), TargetPath: target}
		_, err := call(s, s.node.NodeUnpublishVolume, req)
		if err != nil {
			wantCode(t, "NodeUnpublishVolume", req, err, rule("NodeUnpublishVolume", "a volume that does not exist → NOT_FOUND (or OK: nothing is published)"), codes.NotFound)
		}
	})
	s.run(t, "removes_target_path", func(t *testing.T) {
		s.needCtrl(t, ccCreate)
		m := s.mountVolume(t, s.createVolume(t, s.createReq(s.name("unpub"))), false)
		s.unpublish(t, m)
		ok, err := s.cfg.NodeFS.Exists(m.target)
		expect(t, err == nil && !ok, "NodeUnpublishVolume", nil, rule("NodeUnpublishVolume", "the SP MUST delete the file or directory it created at target_path"),
			"target_path %s still present (%v), want it removed", m.target, err)
	})
}

func nodeStageCases(t *testing.T, s *suite) {
	s.run(t, "missing_volume_id", func(t *testing.T) {
		staging, _ := s.caseDir(t)
		req := &csi.NodeStageVolumeRequest{StagingTargetPath: staging, VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
		_, err := call(s, s.node.NodeStageVolume, req)
		wantCode(t, "NodeStageVolume", req, err, rule("NodeStageVolume", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "missing_staging_path", func(t *testing.T) {
		req := &csi.NodeStageVolumeRequest{VolumeId: s.missingVolumeID(), VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
		_, err := call(s, s.node.NodeStageVolume, req)
		wantCode(t, "NodeStageVolume", req, err, rule("NodeStageVolume", "staging_target_path is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "missing_capability", func(t *testing.T) {
		s.needCtrl(t, ccCreate)
		v := s.createVolume(t, s.createReq(s.name("stnocap")))
		staging, _ := s.caseDir(t)
		req := &csi.NodeStageVolumeRequest{VolumeId: v.GetVolumeId(), StagingTargetPath: staging, Secrets: s.cfg.Secrets}
		_, err := call(s, s.node.NodeStageVolume, req)
		wantCode(t, "NodeStageVolume", req, err, rule("NodeStageVolume", "volume_capability is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "unknown_volume", func(t *testing.T) {
		staging, _ := s.caseDir(t)
		req := &csi.NodeStageVolumeRequest{VolumeId: s.missingVolumeID(), StagingTargetPath: staging, VolumeCapability: s.volCap(sw), Secrets: s.cfg.Secrets}
		_, err := call(s, s.node.NodeStageVolume, req)
		wantCode(t, "NodeStageVolume", req, err, rule("NodeStageVolume", "the volume does not exist → NOT_FOUND"), codes.NotFound)
	})
	s.run(t, "delete_while_staged", func(t *testing.T) {
		s.needCtrl(t, ccCreate)
		resp, err := retry(s, s.ctl.CreateVolume, s.createReq(s.name("delstaged")))
		must(t, "CreateVolume", nil, err, "")
		v := resp.GetVolume()
		s.deleteOnCleanup(t, v.GetVolumeId())
		staging, target := s.caseDir(t)
		m := &mounted{vol: v, cap: s.volCap(sw), staging: staging, target: target}
		sreq := s.stageReq(m)
		_, err = retry(s, s.node.NodeStageVolume, sreq)
		must(t, "NodeStageVolume", sreq, err, rule("NodeStageVolume", "MUST succeed for an existing volume"))
		req := &csi.DeleteVolumeRequest{VolumeId: v.GetVolumeId(), Secrets: s.cfg.Secrets}
		_, derr := retry(s, s.ctl.DeleteVolume, req)
		if derr != nil {
			wantCode(t, "DeleteVolume", req, derr, rule("DeleteVolume", "a volume in use is refused with FAILED_PRECONDITION (or deleted without leaking what staging attached)"), codes.FailedPrecondition)
		}
		ureq := &csi.NodeUnstageVolumeRequest{VolumeId: v.GetVolumeId(), StagingTargetPath: staging}
		_, err = retry(s, s.node.NodeUnstageVolume, ureq)
		if err != nil && !(derr == nil && status.Code(err) == codes.NotFound) {
			t.Error(describe("NodeUnstageVolume", ureq, err, "OK", rule("NodeUnstageVolume", "unstaging a staged volume MUST succeed")))
		}
		// The case directory's cleanup fails the case if staging left a
		// mount or (block) a loop device behind.
	})
	stageConflictCases(t, s)
	s.run(t, "Unstage/missing_volume_id", func(t *testing.T) {
		staging, _ := s.caseDir(t)
		req := &csi.NodeUnstageVolumeRequest{StagingTargetPath: staging}
		_, err := call(s, s.node.NodeUnstageVolume, req)
		wantCode(t, "NodeUnstageVolume", req, err, rule("NodeUnstageVolume", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "Unstage/missing_staging_path", func(t *testing.T) {
		req := &csi.NodeUnstageVolumeRequest{VolumeId: s.missingVolumeID()}
		_, err := call(s, s.node.NodeUnstageVolume, req)
		wantCode(t, "NodeUnstageVolume", req, err, rule("NodeUnstageVolume", "staging_target_path is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "Unstage/not_staged", func(t *testing.T) {
		s.needCtrl(t, ccCreate)
		v := s.createVolume(t, s.createReq(s.name("notstaged")))
		staging, _ := s.caseDir(t)
		req := &csi.NodeUnstageVolumeRequest{VolumeId: v.GetVolumeId(), StagingTargetPath: staging}
		_, err := call(s, s.node.NodeUnstageVolume, req)
		must(t, "NodeUnstageVolume", req, err, rule("NodeUnstageVolume", "a volume not staged at staging_target_path counts as unstaged → OK"))
	})
	s.run(t, "Unstage/unknown_volume", func(t *testing.T) {
		staging, _ := s.caseDir(t)
		req := &csi.NodeUnstageVolumeRequest{VolumeId: s.missingVolumeID(), StagingTargetPath: staging}
		_, err := call(s, s.node.NodeUnstageVolume, req)
		if err != nil {
			wantCode(t, "NodeUnstageVolume", req, err, rule("NodeUnstageVolume", "a volume that does not exist → NOT_FOUND (or OK: nothing is staged)"), codes.NotFound)
		}
	})
}

func statsCases(t *testing.T, s *suite) {
	s.run(t, "missing_volume_id", func(t *testing.T) {
		_, target := s.caseDir(t)
		req := &csi.NodeGetVolumeStatsRequest{VolumePath: target}
		_, err := call(s, s.node.NodeGetVolumeStats, req)
		wantCode(t, "NodeGetVolumeStats", req, err, rule("NodeGetVolumeStats", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "missing_volume_path", func(t *testing.T) {
		req := &csi.NodeGetVolumeStatsRequest{VolumeId: s.missingVolumeID()}
		_, err := call(s, s.node.NodeGetVolumeStats, req)
		wantCode(t, "NodeGetVolumeStats", req, err, rule("NodeGetVolumeStats", "volume_path is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "unknown_volume", func(t *testing.T) {
		_, target := s.caseDir(t)
		req := &csi.NodeGetVolumeStatsRequest{VolumeId: s.missingVolumeID(), VolumePath: target}
		_, err := call(s, s.node.NodeGetVolumeStats, req)
		wantCode(t, "NodeGetVolumeStats", req, err, rule("NodeGetVolumeStats", "the volume does not exist → NOT_FOUND"), codes.NotFound)
	})
	s.run(t, "not_published_at_path", func(t *testing.T) {
		s.needCtrl(t, ccCreate)
		m := s.mountVolume(t, s.createVolume(t, s.createReq(s.name("statpath"))), false)
		req := &csi.NodeGetVolumeStatsRequest{VolumeId: m.vol.GetVolumeId(), VolumePath: filepath.Join(filepath.Dir(m.target), "elsewhere")}
		_, err := call(s, s.node.NodeGetVolumeStats, req)
		wantCode(t, "NodeGetVolumeStats", req, err, rule("NodeGetVolumeStats", "the volume is not published at volume_path → NOT_FOUND"), codes.NotFound)
	})
	s.run(t, "published_volume", func(t *testing.T) {
		s.needCtrl(t, ccCreate)
		m := s.mountVolume(t, s.createVolume(t, s.createReq(s.name("stat"))), false)
		req := &csi.NodeGetVolumeStatsRequest{VolumeId: m.vol.GetVolumeId(), VolumePath: m.target}
		resp, err := call(s, s.node.NodeGetVolumeStats, req)
		must(t, "NodeGetVolumeStats", req, err, rule("NodeGetVolumeStats", "MUST succeed for a volume published at volume_path"))
		total := bytesTotal(resp)
		expect(t, total > 0, "NodeGetVolumeStats", req, rule("NodeGetVolumeStats", "usage: total is REQUIRED for each unit reported; BYTES reports the volume's size"), "usage %v, want a BYTES entry with total > 0", resp.GetUsage())
		for _, u := range resp.GetUsage() {
			expect(t, u.GetTotal() >= 0 && u.GetUsed() >= 0 && u.GetAvailable() >= 0, "NodeGetVolumeStats", req,
				rule("NodeGetVolumeStats", "usage values are not negative"), "usage %v, want values >= 0", u)
			if s.access == MountAccess && u.GetUnit() == csi.VolumeUsage_BYTES {
				expect(t, u.GetUsed()+u.GetAvailable() <= u.GetTotal(), "NodeGetVolumeStats", req,
					rule("NodeGetVolumeStats", "used and available are parts of total"), "used %d + available %d > total %d", u.GetUsed(), u.GetAvailable(), u.GetTotal())
			}
		}
		// The harness measures what is really at volume_path: the size of
		// the block device (BLKGETSIZE64), or of the filesystem (statfs).
		size, err := s.cfg.NodeFS.Capacity(m.target)
		if err != nil {
			t.Fatalf("measuring %s: %v", m.target, err)
		}
		what := "filesystem at volume_path (statfs blocks × block size)"
		if s.access == BlockAccess {
			what = "block device at volume_path (BLKGETSIZE64)"
		}
		expect(t, total == size, "NodeGetVolumeStats", req,
			rule("NodeGetVolumeStats", "it returns the volume capacity statistics available for the volume")+"; "+
				kube("kubelet volume stats", "the BYTES total is shown as the volume's capacity (kubelet_volume_stats_capacity_bytes) and drives alerts on full volumes"),
			"BYTES total %d, want %d, the size of the %s", total, size, what)
	})
}

// bytesTotal returns the total of the BYTES usage entry, or 0.
func bytesTotal(r *csi.NodeGetVolumeStatsResponse) int64 {
	for _, u := range r.GetUsage() {
		if u.GetUnit() == csi.VolumeUsage_BYTES {
			return u.GetTotal()
		}
	}
	return 0
}

func healthCases(t *testing.T, s *suite) {
	s.run(t, "missing_volume_id", func(t *testing.T) {
		req := &csi.NodeGetVolumeHealthRequest{}
		_, err := call(s, s.node.NodeGetVolumeHealth, req)
		wantCode(t, "NodeGetVolumeHealth", req, err, rule("NodeGetVolumeHealth", "volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "published_volume", func(t *testing.T) {
		s.needCtrl(t, ccCreate)
		m := s.mountVolume(t, s.createVolume(t, s.createReq(s.name("health"))), false)
		req := &csi.NodeGetVolumeHealthRequest{VolumeId: m.vol.GetVolumeId()}
		resp, err := call(s, s.node.NodeGetVolumeHealth, req)
		must(t, "NodeGetVolumeHealth", req, err, rule("NodeGetVolumeHealth", "MUST succeed for a published volume"))
		expect(t, resp.GetVolumeHealth().GetVolumeId() == m.vol.GetVolumeId(), "NodeGetVolumeHealth", req,
			rule("NodeGetVolumeHealth", "volume_health names the volume asked about"), "volume_health %v, want volume %s", resp.GetVolumeHealth(), m.vol.GetVolumeId())
	})
}

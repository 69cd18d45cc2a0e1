package sanity

import (
	"context"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// restartCases retry calls after the driver restarted on the same state,
// as a CO does after a crash.
func restartCases(t *testing.T, s *suite) {
	if ok, why := s.in.canRestart(&s.cfg); !ok {
		t.Skip(why)
	}
	s.run(t, "CreateVolume/retry_after_restart", func(t *testing.T) {
		s.needCtrl(t, ccCreate)
		req := s.createReq(s.name("restart"))
		v := s.createVolume(t, req)
		before := s.countVolumes(t)
		s.restart(t)
		resp, err := retry(s, s.ctl.CreateVolume, req)
		must(t, "CreateVolume (after restart)", req, err, rule("CreateVolume", "this operation MUST be idempotent")+"; "+kube("external-provisioner", "retries a CreateVolume that timed out, also after the driver restarted"))
		if id := resp.GetVolume().GetVolumeId(); id != v.GetVolumeId() && id != "" {
			s.deleteOnCleanup(t, id)
		}
		expect(t, resp.GetVolume().GetVolumeId() == v.GetVolumeId(), "CreateVolume (after restart)", req,
			rule("CreateVolume", "a volume with this name that already exists and is compatible → OK, that volume")+"; "+kube("external-provisioner", "retries across driver restarts"), "volume_id %q, want %q", resp.GetVolume().GetVolumeId(), v.GetVolumeId())
		if before >= 0 {
			after := s.countVolumes(t)
			expect(t, after == before, "ListVolumes (after restart)", nil, rule("CreateVolume", "the plugin SHOULD ensure that multiple CreateVolume calls for the same name do not result in more than one volume"), "%d volumes, want %d", after, before)
		}
	})
	s.run(t, "CreateSnapshot/retry_after_restart", func(t *testing.T) {
		s.needCtrl(t, ccCreate, ccSnap)
		v := s.createVolume(t, s.createReq(s.name("rsnsrc")))
		name := s.name("rsnap")
		snap := s.createSnapshot(t, name, v.GetVolumeId())
		s.restart(t)
		req := &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: v.GetVolumeId(), Parameters: s.cfg.SnapshotParameters, Secrets: s.cfg.Secrets}
		resp, err := retry(s, s.ctl.CreateSnapshot, req)
		must(t, "CreateSnapshot (after restart)", req, err, rule("CreateSnapshot", "this operation MUST be idempotent")+"; "+kube("external-snapshotter", "retries a CreateSnapshot that timed out, also after the driver restarted"))
		expect(t, resp.GetSnapshot().GetSnapshotId() == snap.GetSnapshotId(), "CreateSnapshot (after restart)", req,
			rule("CreateSnapshot", "a snapshot with this name that already exists for the same source → OK, that snapshot")+"; "+kube("external-snapshotter", "retries across driver restarts"), "snapshot_id %q, want %q", resp.GetSnapshot().GetSnapshotId(), snap.GetSnapshotId())
	})
	s.run(t, "published_volume_after_restart", func(t *testing.T) {
		s.needNode(t)
		s.needCtrl(t, ccCreate)
		m := s.mountVolume(t, s.createVolume(t, s.createReq(s.name("rpub"))), false)
		want := s.write(t, m, 0)
		s.restart(t)
		s.read(t, m, 0, want, kube("node plugin restarts", "a DaemonSet rollout restarts the node plugin under running pods; their published volumes stay usable"))
		req := s.publishReq(m, false)
		_, err := retry(s, s.node.NodePublishVolume, req)
		must(t, "NodePublishVolume (after restart)", req, err, rule("NodePublishVolume", "this operation MUST be idempotent")+"; "+kube("kubelet", "re-publishes mounted volumes after the node plugin restarts"))
		s.unpublish(t, m)
		ok, err := s.cfg.NodeFS.Exists(m.target)
		expect(t, err == nil && !ok, "NodeUnpublishVolume (after restart)", nil, rule("NodeUnpublishVolume", "it MUST undo the work by the corresponding NodePublishVolume, and the SP MUST delete the file or directory it created at target_path")+"; "+kube("kubelet", "unpublishes volumes the node plugin published before it restarted"),
			"target_path still present (%v), want it removed", err)
		if m.staging != "" {
			s.unstage(t, m)
		}
	})
}

// restart restarts the driver or fails the case.
func (s *suite) restart(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
	defer cancel()
	if err := s.in.restart(ctx, &s.cfg); err != nil {
		t.Fatalf("restarting the driver: %v", err)
	}
}

// countVolumes counts the volumes ListVolumes reports, or -1 without
// LIST_VOLUMES.
func (s *suite) countVolumes(t *testing.T) int {
	t.Helper()
	if !s.hasCtrl(ccList) {
		return -1
	}
	ids, err := s.allVolumeIDs(&csi.ListVolumesRequest{})
	must(t, "ListVolumes", &csi.ListVolumesRequest{}, err, rule("ListVolumes", "MUST succeed"))
	return len(ids)
}

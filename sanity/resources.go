package sanity

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// retry makes a call, retrying while the driver answers Aborted (another
// operation on the same volume is in progress, so the spec tells the CO to
// retry with backoff). It gives up after about the per-call deadline.
func retry[Q proto.Message, R any](s *suite, f func(context.Context, Q, ...grpc.CallOption) (R, error), q Q) (R, error) {
	deadline := time.Now().Add(s.cfg.CallTimeout)
	wait := 10 * time.Millisecond
	for {
		r, err := call(s, f, q)
		if status.Code(err) != codes.Aborted || time.Now().After(deadline) {
			return r, err
		}
		time.Sleep(wait)
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// createVolume creates a volume that is deleted when the case ends.
func (s *suite) createVolume(t testing.TB, req *csi.CreateVolumeRequest) *csi.Volume {
	t.Helper()
	resp, err := retry(s, s.ctl.CreateVolume, req)
	must(t, "CreateVolume", req, err, rule("CreateVolume", "a valid request for a new name MUST create the volume"))
	v := resp.GetVolume()
	if v.GetVolumeId() == "" {
		t.Fatal(describe("CreateVolume", req, nil, "a volume with a volume_id", rule("CreateVolume", "volume.volume_id is REQUIRED in the response")))
	}
	s.deleteOnCleanup(t, v.GetVolumeId())
	return v
}

// deleteOnCleanup deletes the volume when the case ends.
func (s *suite) deleteOnCleanup(t testing.TB, id string) {
	s.vols.add(t, id)
	t.Cleanup(func() {
		req := &csi.DeleteVolumeRequest{VolumeId: id, Secrets: s.cfg.Secrets}
		if _, err := retry(s, s.ctl.DeleteVolume, req); err != nil && status.Code(err) != codes.NotFound {
			t.Error(describe("DeleteVolume (cleanup)", req, err, "OK", rule("DeleteVolume", "deleting an unpublished volume without snapshots MUST succeed")))
		}
	})
}

// createSnapshot snapshots a volume; the snapshot is deleted when the
// case ends.
func (s *suite) createSnapshot(t testing.TB, name, source string) *csi.Snapshot {
	t.Helper()
	req := &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: source, Parameters: s.cfg.SnapshotParameters, Secrets: s.cfg.Secrets}
	resp, err := retry(s, s.ctl.CreateSnapshot, req)
	must(t, "CreateSnapshot", req, err, rule("CreateSnapshot", "a valid request for a new name MUST create the snapshot"))
	snap := resp.GetSnapshot()
	if snap.GetSnapshotId() == "" {
		t.Fatal(describe("CreateSnapshot", req, nil, "a snapshot with a snapshot_id", rule("CreateSnapshot", "snapshot.snapshot_id is REQUIRED")))
	}
	t.Cleanup(func() {
		dreq := &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId(), Secrets: s.cfg.Secrets}
		if _, err := retry(s, s.ctl.DeleteSnapshot, dreq); err != nil {
			t.Error(describe("DeleteSnapshot (cleanup)", dreq, err, "OK", rule("DeleteSnapshot", "deleting an existing snapshot MUST succeed")))
		}
	})
	return snap
}

// mounted is a volume made available on the node.
type mounted struct {
	vol     *csi.Volume
	cap     *csi.VolumeCapability
	pubCtx  map[string]string
	staging string // "" without STAGE_UNSTAGE_VOLUME
	target  string
}

// data is where data-path cases read and write: a file in a mounted
// filesystem, the device itself for block volumes.
func (m *mounted) data(a AccessType) string {
	if a == BlockAccess {
		return m.target
	}
	return filepath.Join(m.target, "sanity-data")
}

// mountVolume makes vol available at a fresh target path: controller
// publish, stage and publish as the driver advertises them. Everything is
// undone, in reverse order, when the case ends.
func (s *suite) mountVolume(t *testing.T, vol *csi.Volume, readonly bool) *mounted {
	t.Helper()
	staging, target := s.caseDir(t)
	m := &mounted{vol: vol, cap: s.volCap(sw), target: target}
	if s.hasCtrl(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME) {
		m.pubCtx = s.controllerPublish(t, vol, m.cap, false)
	}
	if s.nodeCaps[csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		m.staging = staging
		s.stage(t, m)
	}
	s.nodePublish(t, m, readonly)
	return m
}

// controllerPublish publishes vol to this node and unpublishes it at the
// end of the case.
func (s *suite) controllerPublish(t testing.TB, vol *csi.Volume, c *csi.VolumeCapability, readonly bool) map[string]string {
	t.Helper()
	req := &csi.ControllerPublishVolumeRequest{
		VolumeId: vol.GetVolumeId(), NodeId: s.nodeInfo.GetNodeId(), VolumeCapability: c,
		Readonly: readonly, Secrets: s.cfg.Secrets, VolumeContext: vol.GetVolumeContext(),
	}
	resp, err := retry(s, s.ctl.ControllerPublishVolume, req)
	must(t, "ControllerPublishVolume", req, err, rule("ControllerPublishVolume", "publishing an existing volume to an existing node MUST succeed"))
	t.Cleanup(func() {
		ureq := &csi.ControllerUnpublishVolumeRequest{VolumeId: vol.GetVolumeId(), NodeId: s.nodeInfo.GetNodeId(), Secrets: s.cfg.Secrets}
		if _, err := retry(s, s.ctl.ControllerUnpublishVolume, ureq); err != nil {
			t.Error(describe("ControllerUnpublishVolume (cleanup)", ureq, err, "OK", rule("ControllerUnpublishVolume", "MUST succeed for a published volume")))
		}
	})
	return resp.GetPublishContext()
}

// stageReq is the NodeStageVolume request for m.
func (s *suite) stageReq(m *mounted) *csi.NodeStageVolumeRequest {
	return &csi.NodeStageVolumeRequest{
		VolumeId: m.vol.GetVolumeId(), PublishContext: m.pubCtx, StagingTargetPath: m.staging,
		VolumeCapability: m.cap, Secrets: s.cfg.Secrets, VolumeContext: m.vol.GetVolumeContext(),
	}
}

// stage stages m and unstages it when the case ends.
func (s *suite) stage(t testing.TB, m *mounted) {
	t.Helper()
	req := s.stageReq(m)
	_, err := retry(s, s.node.NodeStageVolume, req)
	must(t, "NodeStageVolume", req, err, rule("NodeStageVolume", "staging an existing volume at a staging directory the CO created MUST succeed"))
	t.Cleanup(func() { s.unstage(t, m) })
}

// unstage unstages m; it is idempotent.
func (s *suite) unstage(t testing.TB, m *mounted) {
	t.Helper()
	req := &csi.NodeUnstageVolumeRequest{VolumeId: m.vol.GetVolumeId(), StagingTargetPath: m.staging}
	if _, err := retry(s, s.node.NodeUnstageVolume, req); err != nil {
		t.Error(describe("NodeUnstageVolume", req, err, "OK", rule("NodeUnstageVolume", "MUST succeed, also when the volume is not staged (idempotent)")))
	}
}

// publishReq is the NodePublishVolume request for m.
func (s *suite) publishReq(m *mounted, readonly bool) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId: m.vol.GetVolumeId(), PublishContext: m.pubCtx, StagingTargetPath: m.staging,
		TargetPath: m.target, VolumeCapability: m.cap, Readonly: readonly,
		Secrets: s.cfg.Secrets, VolumeContext: m.vol.GetVolumeContext(),
	}
}

// nodePublish publishes m at its target and unpublishes it when the case
// ends.
func (s *suite) nodePublish(t testing.TB, m *mounted, readonly bool) {
	t.Helper()
	req := s.publishReq(m, readonly)
	_, err := retry(s, s.node.NodePublishVolume, req)
	must(t, "NodePublishVolume", req, err, rule("NodePublishVolume", "publishing a staged volume at a target whose parent exists MUST succeed"))
	t.Cleanup(func() { s.unpublish(t, m) })
}

// unpublish unpublishes m; it is idempotent.
func (s *suite) unpublish(t testing.TB, m *mounted) {
	t.Helper()
	req := &csi.NodeUnpublishVolumeRequest{VolumeId: m.vol.GetVolumeId(), TargetPath: m.target}
	if _, err := retry(s, s.node.NodeUnpublishVolume, req); err != nil {
		t.Error(describe("NodeUnpublishVolume", req, err, "OK", rule("NodeUnpublishVolume", "MUST succeed, also when the volume is not published (idempotent)")))
	}
}

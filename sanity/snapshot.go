package sanity

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// snapshotCases covers CreateSnapshot, DeleteSnapshot and ListSnapshots.
func snapshotCases(t *testing.T, s *suite) {
	s.run(t, "CreateSnapshot", func(t *testing.T) {
		s.needCtrl(t, ccCreate, ccSnap)
		createSnapshotCases(t, s)
	})
	s.run(t, "DeleteSnapshot", func(t *testing.T) {
		s.needCtrl(t, ccCreate, ccSnap)
		deleteSnapshotCases(t, s)
	})
	s.run(t, "ListSnapshots", func(t *testing.T) {
		s.needCtrl(t, ccCreate, ccSnap, ccListSn)
		listSnapshotCases(t, s)
	})
}

// checkSnapshot checks the fields the spec requires of a snapshot.
func checkSnapshot(t *testing.T, rpc string, req *csi.CreateSnapshotRequest, snap *csi.Snapshot, source string) {
	t.Helper()
	expect(t, snap.GetSourceVolumeId() == source, rpc, req, rule("Snapshot", "source_volume_id is REQUIRED and names the source"), "source_volume_id %q, want %q", snap.GetSourceVolumeId(), source)
	expect(t, snap.GetCreationTime() != nil && snap.GetCreationTime().AsTime().Unix() > 0, rpc, req, rule("Snapshot", "creation_time is REQUIRED"), "creation_time %v, want a time", snap.GetCreationTime())
}

func createSnapshotCases(t *testing.T, s *suite) {
	s.run(t, "missing_name", func(t *testing.T) {
		req := &csi.CreateSnapshotRequest{SourceVolumeId: s.missingVolumeID(), Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.CreateSnapshot, req)
		wantCode(t, "CreateSnapshot", req, err, rule("CreateSnapshot", "name is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "missing_source", func(t *testing.T) {
		req := &csi.CreateSnapshotRequest{Name: s.name("nosrc"), Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.CreateSnapshot, req)
		wantCode(t, "CreateSnapshot", req, err, rule("CreateSnapshot", "source_volume_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "unknown_source", func(t *testing.T) {
		req := &csi.CreateSnapshotRequest{Name: s.name("missingsrc"), SourceVolumeId: s.missingVolumeID(), Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.CreateSnapshot, req)
		wantCode(t, "CreateSnapshot", req, err, rule("CreateSnapshot", "the source volume does not exist → NOT_FOUND"), codes.NotFound)
	})
	s.run(t, "same_name_same_source", func(t *testing.T) {
		v := s.createVolume(t, s.createReq(s.name("snsrc")))
		name := s.name("snap")
		first := s.createSnapshot(t, name, v.GetVolumeId())
		req := &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: v.GetVolumeId(), Parameters: s.cfg.SnapshotParameters, Secrets: s.cfg.Secrets}
		checkSnapshot(t, "CreateSnapshot", req, first, v.GetVolumeId())
		for range s.cfg.IdempotentCount {
			resp, err := retry(s, s.ctl.CreateSnapshot, req)
			must(t, "CreateSnapshot (repeat)", req, err, rule("CreateSnapshot", "a repeated identical request MUST succeed (idempotency)"))
			expect(t, resp.GetSnapshot().GetSnapshotId() == first.GetSnapshotId(), "CreateSnapshot (repeat)", req,
				rule("CreateSnapshot", "a repeated request returns the existing snapshot"), "snapshot_id %q, want %q", resp.GetSnapshot().GetSnapshotId(), first.GetSnapshotId())
		}
	})
	s.run(t, "same_name_other_source", func(t *testing.T) {
		v1 := s.createVolume(t, s.createReq(s.name("snsrc1")))
		v2 := s.createVolume(t, s.createReq(s.name("snsrc2")))
		name := s.name("snap")
		s.createSnapshot(t, name, v1.GetVolumeId())
		req := &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: v2.GetVolumeId(), Parameters: s.cfg.SnapshotParameters, Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.CreateSnapshot, req)
		wantCode(t, "CreateSnapshot", req, err, rule("CreateSnapshot", "a snapshot with this name exists for another source → ALREADY_EXISTS"), codes.AlreadyExists)
	})
	s.run(t, "max_length_name", func(t *testing.T) {
		v := s.createVolume(t, s.createReq(s.name("snmax")))
		s.createSnapshot(t, s.longName(128), v.GetVolumeId())
	})
}

func deleteSnapshotCases(t *testing.T, s *suite) {
	s.run(t, "missing_id", func(t *testing.T) {
		req := &csi.DeleteSnapshotRequest{Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.DeleteSnapshot, req)
		wantCode(t, "DeleteSnapshot", req, err, rule("DeleteSnapshot", "snapshot_id is REQUIRED → INVALID_ARGUMENT"), codes.InvalidArgument)
	})
	s.run(t, "unknown_id", func(t *testing.T) {
		req := &csi.DeleteSnapshotRequest{SnapshotId: "sanity-missing-snapshot-" + s.runID, Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.DeleteSnapshot, req)
		must(t, "DeleteSnapshot", req, err, rule("DeleteSnapshot", "a snapshot that does not exist counts as deleted → OK"))
	})
	s.run(t, "twice", func(t *testing.T) {
		v := s.createVolume(t, s.createReq(s.name("dsnsrc")))
		snap := s.createSnapshot(t, s.name("dsnap"), v.GetVolumeId())
		req := &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId(), Secrets: s.cfg.Secrets}
		for i := 0; i <= s.cfg.IdempotentCount; i++ {
			_, err := retry(s, s.ctl.DeleteSnapshot, req)
			must(t, "DeleteSnapshot", req, err, rule("DeleteSnapshot", "deleting a snapshot MUST succeed, and again once it is gone (idempotency)"))
		}
	})
	s.run(t, "source_deletable_after_snapshot", func(t *testing.T) {
		resp, err := retry(s, s.ctl.CreateVolume, s.createReq(s.name("dsnsrc")))
		must(t, "CreateVolume", nil, err, "")
		id := resp.GetVolume().GetVolumeId()
		s.deleteOnCleanup(t, id)
		s.createSnapshot(t, s.name("dsnap"), id)
		req := &csi.DeleteVolumeRequest{VolumeId: id, Secrets: s.cfg.Secrets}
		_, err = retry(s, s.ctl.DeleteVolume, req)
		if err != nil {
			wantCode(t, "DeleteVolume", req, err, rule("DeleteVolume", "a volume with snapshots is deleted, or refused with FAILED_PRECONDITION if the plugin cannot delete it independently"), codes.FailedPrecondition)
		}
	})
}

func listSnapshotCases(t *testing.T, s *suite) {
	// Three snapshots of three volumes; the middle one is the target.
	three := func(t *testing.T) [3]*csi.Snapshot {
		var out [3]*csi.Snapshot
		for i := range out {
			v := s.createVolume(t, s.createReq(s.name("lsvol")))
			out[i] = s.createSnapshot(t, s.name("lssnap"), v.GetVolumeId())
		}
		return out
	}
	s.run(t, "entries_valid", func(t *testing.T) {
		req := &csi.ListSnapshotsRequest{Secrets: s.cfg.Secrets}
		resp, err := call(s, s.ctl.ListSnapshots, req)
		must(t, "ListSnapshots", req, err, rule("ListSnapshots", "MUST succeed for a plugin advertising LIST_SNAPSHOTS"))
		for _, e := range resp.GetEntries() {
			sn := e.GetSnapshot()
			expect(t, sn.GetSnapshotId() != "" && sn.GetSourceVolumeId() != "" && sn.GetCreationTime() != nil, "ListSnapshots", req,
				rule("ListSnapshots", "every entry has snapshot_id, source_volume_id and creation_time"), "entry %v, want all three set", e)
		}
	})
	s.run(t, "by_snapshot_id", func(t *testing.T) {
		sn := three(t)
		req := &csi.ListSnapshotsRequest{SnapshotId: sn[1].GetSnapshotId(), Secrets: s.cfg.Secrets}
		resp, err := call(s, s.ctl.ListSnapshots, req)
		must(t, "ListSnapshots", req, err, rule("ListSnapshots", "MUST succeed"))
		expect(t, len(resp.GetEntries()) == 1 && resp.GetEntries()[0].GetSnapshot().GetSnapshotId() == sn[1].GetSnapshotId(), "ListSnapshots", req,
			rule("ListSnapshots", "with snapshot_id set, list only that snapshot"), "%d entries %v, want exactly %s", len(resp.GetEntries()), resp.GetEntries(), sn[1].GetSnapshotId())
	})
	s.run(t, "by_unknown_snapshot_id", func(t *testing.T) {
		req := &csi.ListSnapshotsRequest{SnapshotId: "sanity-missing-snapshot-" + s.runID, Secrets: s.cfg.Secrets}
		resp, err := call(s, s.ctl.ListSnapshots, req)
		must(t, "ListSnapshots", req, err, rule("ListSnapshots", "the plugin SHALL return the snapshots within the given parameters: for a snapshot_id it does not have, none — an empty list, not an error"))
		expect(t, len(resp.GetEntries()) == 0, "ListSnapshots", req, rule("ListSnapshots", "the plugin SHALL return the snapshots within the given parameters: for a snapshot_id it does not have, none"), "%d entries, want 0", len(resp.GetEntries()))
	})
	s.run(t, "by_source_volume_id", func(t *testing.T) {
		sn := three(t)
		req := &csi.ListSnapshotsRequest{SourceVolumeId: sn[1].GetSourceVolumeId(), Secrets: s.cfg.Secrets}
		resp, err := call(s, s.ctl.ListSnapshots, req)
		must(t, "ListSnapshots", req, err, rule("ListSnapshots", "MUST succeed"))
		expect(t, len(resp.GetEntries()) == 1 && resp.GetEntries()[0].GetSnapshot().GetSnapshotId() == sn[1].GetSnapshotId(), "ListSnapshots", req,
			rule("ListSnapshots", "with source_volume_id set, list only that volume's snapshots"), "%d entries %v, want exactly %s", len(resp.GetEntries()), resp.GetEntries(), sn[1].GetSnapshotId())
	})
	s.run(t, "by_unknown_source_volume_id", func(t *testing.T) {
		req := &csi.ListSnapshotsRequest{SourceVolumeId: s.missingVolumeID(), Secrets: s.cfg.Secrets}
		resp, err := call(s, s.ctl.ListSnapshots, req)
		must(t, "ListSnapshots", req, err, rule("ListSnapshots", "the plugin SHALL return the snapshots within the given parameters: for a source_volume_id it does not have, none — an empty list, not an error"))
		expect(t, len(resp.GetEntries()) == 0, "ListSnapshots", req, rule("ListSnapshots", "the plugin SHALL return the snapshots within the given parameters: for a source_volume_id it does not have, none"), "%d entries, want 0", len(resp.GetEntries()))
	})
	s.run(t, "created_listed_deleted_gone", func(t *testing.T) {
		v := s.createVolume(t, s.createReq(s.name("lsdel")))
		req := &csi.CreateSnapshotRequest{Name: s.name("lsdel"), SourceVolumeId: v.GetVolumeId(), Secrets: s.cfg.Secrets}
		resp, err := retry(s, s.ctl.CreateSnapshot, req)
		must(t, "CreateSnapshot", req, err, "")
		id := resp.GetSnapshot().GetSnapshotId()
		t.Cleanup(func() {
			_, _ = call(s, s.ctl.DeleteSnapshot, &csi.DeleteSnapshotRequest{SnapshotId: id, Secrets: s.cfg.Secrets})
		})
		ids, err := s.allSnapshotIDs(0)
		must(t, "ListSnapshots", &csi.ListSnapshotsRequest{}, err, rule("ListSnapshots", "MUST succeed"))
		expect(t, ids[id] == 1, "ListSnapshots", nil, rule("ListSnapshots", "lists every snapshot exactly once"), "snapshot %s listed %d times, want once", id, ids[id])
		dreq := &csi.DeleteSnapshotRequest{SnapshotId: id, Secrets: s.cfg.Secrets}
		_, err = retry(s, s.ctl.DeleteSnapshot, dreq)
		must(t, "DeleteSnapshot", dreq, err, rule("DeleteSnapshot", "MUST succeed"))
		ids, err = s.allSnapshotIDs(0)
		must(t, "ListSnapshots", &csi.ListSnapshotsRequest{}, err, rule("ListSnapshots", "MUST succeed"))
		expect(t, ids[id] == 0, "ListSnapshots", nil, rule("ListSnapshots", "a deleted snapshot is no longer listed"), "deleted snapshot %s listed, want it gone", id)
	})
	s.run(t, "invalid_starting_token", func(t *testing.T) {
		req := &csi.ListSnapshotsRequest{StartingToken: "sanity-invalid-token", Secrets: s.cfg.Secrets}
		_, err := call(s, s.ctl.ListSnapshots, req)
		wantCode(t, "ListSnapshots", req, err, rule("ListSnapshots", "a starting_token the plugin cannot use → ABORTED"), codes.Aborted)
	})
}

// allSnapshotIDs follows ListSnapshots pages of size max and counts IDs.
func (s *suite) allSnapshotIDs(max int32) (map[string]int, error) {
	ids := map[string]int{}
	q := &csi.ListSnapshotsRequest{MaxEntries: max, Secrets: s.cfg.Secrets}
	for range 10000 {
		resp, err := retry(s, s.ctl.ListSnapshots, q)
		if err != nil {
			return ids, err
		}
		for _, e := range resp.GetEntries() {
			ids[e.GetSnapshot().GetSnapshotId()]++
		}
		if resp.GetNextToken() == "" {
			return ids, nil
		}
		q = &csi.ListSnapshotsRequest{MaxEntries: max, StartingToken: resp.GetNextToken(), Secrets: s.cfg.Secrets}
	}
	return ids, nil
}

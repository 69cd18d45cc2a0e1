package sanity

import (
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// raceCodes are the answers the spec allows to calls racing on one
// volume: success, Aborted (an operation is pending: retry), and the
// state-dependent NotFound and FailedPrecondition.
var raceCodes = map[codes.Code]bool{codes.OK: true, codes.Aborted: true, codes.NotFound: true, codes.FailedPrecondition: true}

// concurrencyCases send the same or conflicting calls from many
// goroutines at once, as a CO retrying after timeouts does.
func concurrencyCases(t *testing.T, s *suite) {
	s.run(t, "CreateVolume/same_name_one_volume", func(t *testing.T) {
		s.needCtrl(t, ccCreate)
		before := -1
		if s.hasCtrl(ccList) {
			ids, err := s.allVolumeIDs(&csi.ListVolumesRequest{})
			must(t, "ListVolumes", &csi.ListVolumesRequest{}, err, "")
			before = len(ids)
		}
		req := s.createReq(s.name("race"))
		ids := make([]string, s.cfg.Concurrency)
		errs := make([]error, s.cfg.Concurrency)
		var wg sync.WaitGroup
		for i := range s.cfg.Concurrency {
			wg.Go(func() {
				resp, err := retry(s, s.ctl.CreateVolume, proto.Clone(req).(*csi.CreateVolumeRequest))
				ids[i], errs[i] = resp.GetVolume().GetVolumeId(), err
			})
		}
		wg.Wait()
		distinct := map[string]bool{}
		for i, err := range errs {
			must(t, "CreateVolume (concurrent)", req, err, rule("CreateVolume", "concurrent identical requests succeed (or answer ABORTED until the first finishes)"))
			if ids[i] != "" && !distinct[ids[i]] {
				s.deleteOnCleanup(t, ids[i])
			}
			distinct[ids[i]] = true
		}
		expect(t, len(distinct) == 1, "CreateVolume (concurrent)", req, rule("CreateVolume", "one name is one volume, however many times it is requested"),
			"%d distinct volume IDs %v, want 1", len(distinct), distinct)
		if before >= 0 {
			after, err := s.allVolumeIDs(&csi.ListVolumesRequest{})
			must(t, "ListVolumes", &csi.ListVolumesRequest{}, err, "")
			expect(t, len(after)-before == 1, "ListVolumes", nil, rule("CreateVolume", "one name is one volume in the backend"),
				"%d more volumes after %d concurrent identical CreateVolume calls, want 1", len(after)-before, s.cfg.Concurrency)
		}
	})
	s.run(t, "CreateVolume/distinct_names", func(t *testing.T) {
		s.needCtrl(t, ccCreate)
		reqs := make([]*csi.CreateVolumeRequest, s.cfg.Concurrency)
		vols := make([]*csi.CreateVolumeResponse, s.cfg.Concurrency)
		errs := make([]error, s.cfg.Concurrency)
		var wg sync.WaitGroup
		for i := range reqs {
			reqs[i] = s.createReq(s.name("par"))
			wg.Go(func() { vols[i], errs[i] = retry(s, s.ctl.CreateVolume, reqs[i]) })
		}
		wg.Wait()
		seen := map[string]bool{}
		for i := range reqs {
			must(t, "CreateVolume (concurrent)", reqs[i], errs[i], rule("CreateVolume", "independent requests succeed concurrently"))
			id := vols[i].GetVolume().GetVolumeId()
			s.deleteOnCleanup(t, id)
			expect(t, !seen[id], "CreateVolume (concurrent)", reqs[i], rule("CreateVolume", "different names are different volumes"), "volume_id %s twice, want distinct IDs", id)
			seen[id] = true
		}
	})
	s.run(t, "CreateSnapshot/same_name_one_snapshot", func(t *testing.T) {
		s.needCtrl(t, ccCreate, ccSnap)
		v := s.createVolume(t, s.createReq(s.name("snrace")))
		req := &csi.CreateSnapshotRequest{Name: s.name("snrace"), SourceVolumeId: v.GetVolumeId(), Parameters: s.cfg.SnapshotParameters, Secrets: s.cfg.Secrets}
		ids := make([]string, s.cfg.Concurrency)
		errs := make([]error, s.cfg.Concurrency)
		var wg sync.WaitGroup
		for i := range ids {
			wg.Go(func() {
				resp, err := retry(s, s.ctl.CreateSnapshot, proto.Clone(req).(*csi.CreateSnapshotRequest))
				ids[i], errs[i] = resp.GetSnapshot().GetSnapshotId(), err
			})
		}
		wg.Wait()
		distinct := map[string]bool{}
		for i, err := range errs {
			must(t, "CreateSnapshot (concurrent)", req, err, rule("CreateSnapshot", "concurrent identical requests succeed (or answer ABORTED until the first finishes)"))
			distinct[ids[i]] = true
		}
		for id := range distinct {
			t.Cleanup(func() {
				_, _ = retry(s, s.ctl.DeleteSnapshot, &csi.DeleteSnapshotRequest{SnapshotId: id, Secrets: s.cfg.Secrets})
			})
		}
		expect(t, len(distinct) == 1, "CreateSnapshot (concurrent)", req, rule("CreateSnapshot", "one name is one snapshot"), "%d distinct snapshot IDs, want 1", len(distinct))
	})
	s.run(t, "racing_publish_unpublish_delete", func(t *testing.T) {
		s.needNode(t)
		s.needCtrl(t, ccCreate)
		v := s.createVolume(t, s.createReq(s.name("race")))
		m := s.mountVolume(t, v, false)
		type answer struct {
			rpc  string
			req  proto.Message
			code codes.Code
			err  error
		}
		// Each call retries while it gets ABORTED, so every one of them
		// really runs against whatever state the others left.
		answers := make(chan answer, 3*s.cfg.Concurrency)
		var wg sync.WaitGroup
		for i := range s.cfg.Concurrency {
			wg.Go(func() {
				switch i % 3 {
				case 0:
					req := s.publishReq(m, false)
					_, err := retry(s, s.node.NodePublishVolume, req)
					answers <- answer{"NodePublishVolume", req, status.Code(err), err}
				case 1:
					req := &csi.NodeUnpublishVolumeRequest{VolumeId: v.GetVolumeId(), TargetPath: m.target}
					_, err := retry(s, s.node.NodeUnpublishVolume, req)
					answers <- answer{"NodeUnpublishVolume", req, status.Code(err), err}
				default:
					req := &csi.DeleteVolumeRequest{VolumeId: v.GetVolumeId(), Secrets: s.cfg.Secrets}
					_, err := retry(s, s.ctl.DeleteVolume, req)
					answers <- answer{"DeleteVolume", req, status.Code(err), err}
				}
			})
		}
		wg.Wait()
		close(answers)
		for a := range answers {
			if !raceCodes[a.code] {
				t.Error(describe(a.rpc, a.req, a.err, "OK, Aborted, NotFound or FailedPrecondition",
					rule(a.rpc, "calls racing on one volume get a defined answer: success, ABORTED to retry, or the code of the state they found")))
			}
		}
		// Whatever won, the volume must now unpublish cleanly; the case's
		// cleanup then unstages and deletes it and checks no mount is left.
		s.unpublish(t, m)
	})
}

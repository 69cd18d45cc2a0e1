package sanity

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// pageCount is how many volumes or snapshots the pagination cases create;
// pageSize is the max_entries they list with.
const (
	pageCount = 5
	pageSize  = 2
)

// paginationCases checks that paged listings return every entry exactly
// once. Only the entries the case created are counted, so other volumes
// in the backend do not disturb it.
func paginationCases(t *testing.T, s *suite) {
	s.run(t, "ListVolumes/every_entry_once", func(t *testing.T) {
		s.needCtrl(t, ccCreate, ccList)
		ours := map[string]bool{}
		for range pageCount {
			ours[s.createVolume(t, s.createReq(s.name("page"))).GetVolumeId()] = true
		}
		seen := map[string]int{}
		q := &csi.ListVolumesRequest{MaxEntries: pageSize}
		for page := 0; ; page++ {
			resp, err := retry(s, s.ctl.ListVolumes, q)
			must(t, "ListVolumes", q, err, rule("ListVolumes", "a next_token the plugin returned MUST be accepted"))
			expect(t, len(resp.GetEntries()) <= pageSize, "ListVolumes", q, rule("ListVolumes", "the plugin SHALL NOT return more than max_entries entries"),
				"%d entries, want at most %d", len(resp.GetEntries()), pageSize)
			for _, e := range resp.GetEntries() {
				seen[e.GetVolume().GetVolumeId()]++
			}
			if resp.GetNextToken() == "" {
				break
			}
			if page > 10000 {
				t.Fatal("ListVolumes: more than 10000 pages; next_token never ends")
			}
			q = &csi.ListVolumesRequest{MaxEntries: pageSize, StartingToken: resp.GetNextToken()}
		}
		for id, n := range seen {
			expect(t, n == 1, "ListVolumes (all pages)", nil, rule("ListVolumes", "paging with next_token lists every volume exactly once"), "volume %s %d times, want once", id, n)
		}
		for id := range ours {
			expect(t, seen[id] == 1, "ListVolumes (all pages)", nil, rule("ListVolumes", "paging with next_token lists every volume exactly once"), "volume %s %d times, want once", id, seen[id])
		}
	})
	s.run(t, "ListVolumes/token_survives_changes", func(t *testing.T) {
		s.needCtrl(t, ccCreate, ccList)
		var ids []string
		for range pageCount {
			resp, err := retry(s, s.ctl.CreateVolume, s.createReq(s.name("pagechg")))
			must(t, "CreateVolume", nil, err, "")
			ids = append(ids, resp.GetVolume().GetVolumeId())
			s.deleteOnCleanup(t, ids[len(ids)-1])
		}
		q := &csi.ListVolumesRequest{MaxEntries: pageSize}
		first, err := retry(s, s.ctl.ListVolumes, q)
		must(t, "ListVolumes", q, err, "")
		if first.GetNextToken() == "" {
			t.Fatalf("ListVolumes: got no next_token with %d+ volumes and max_entries %d, want one\n\trule: %s", pageCount, pageSize, rule("ListVolumes", "next_token is set when more entries remain"))
		}
		gone := map[string]bool{}
		for _, e := range first.GetEntries() {
			id := e.GetVolume().GetVolumeId()
			for _, o := range ids {
				if o == id {
					dreq := &csi.DeleteVolumeRequest{VolumeId: id, Secrets: s.cfg.Secrets}
					_, err := retry(s, s.ctl.DeleteVolume, dreq)
					must(t, "DeleteVolume", dreq, err, "")
					gone[id] = true
				}
			}
		}
		s.createVolume(t, s.createReq(s.name("pageadd")))
		rest, err := s.allVolumeIDs(&csi.ListVolumesRequest{StartingToken: first.GetNextToken()})
		must(t, "ListVolumes", &csi.ListVolumesRequest{StartingToken: first.GetNextToken()}, err,
			rule("ListVolumes", "starting_token is a next_token of a previous call; only a token the plugin cannot use → ABORTED"))
		// The spec lets a CO paging while volumes change see duplicates
		// or miss volumes; a volume deleted before the call is neither.
		for id := range rest {
			expect(t, !gone[id], "ListVolumes (after changes)", nil, rule("ListVolumes",
				"the plugin SHALL return the volumes it knows about (while volumes change between pages the CO MAY see duplicates or miss some, not volumes deleted before the call)"),
				"volume %s, deleted before this page was asked for, want it not listed", id)
		}
	})
	s.run(t, "ListSnapshots/every_entry_once", func(t *testing.T) {
		s.needCtrl(t, ccCreate, ccSnap, ccListSn)
		v := s.createVolume(t, s.createReq(s.name("snpage")))
		ours := map[string]bool{}
		for range pageCount {
			ours[s.createSnapshot(t, s.name("snpage"), v.GetVolumeId()).GetSnapshotId()] = true
		}
		q := &csi.ListSnapshotsRequest{MaxEntries: pageSize, Secrets: s.cfg.Secrets}
		first, err := retry(s, s.ctl.ListSnapshots, q)
		must(t, "ListSnapshots", q, err, "")
		expect(t, len(first.GetEntries()) == pageSize && first.GetNextToken() != "", "ListSnapshots", q,
			rule("ListSnapshots", "with more snapshots than max_entries, a full page and a next_token"), "%d entries, next_token %q, want %d and a token", len(first.GetEntries()), first.GetNextToken(), pageSize)
		seen := map[string]int{}
		for _, e := range first.GetEntries() {
			seen[e.GetSnapshot().GetSnapshotId()]++
		}
		// Without max_entries the rest comes in one answer.
		q2 := &csi.ListSnapshotsRequest{StartingToken: first.GetNextToken(), Secrets: s.cfg.Secrets}
		rest, err := retry(s, s.ctl.ListSnapshots, q2)
		must(t, "ListSnapshots", q2, err, rule("ListSnapshots", "a next_token the plugin returned MUST be accepted"))
		for _, e := range rest.GetEntries() {
			seen[e.GetSnapshot().GetSnapshotId()]++
		}
		expect(t, rest.GetNextToken() == "", "ListSnapshots", q2, rule("ListSnapshots", "without max_entries the plugin returns every remaining entry"), "next_token %q, want none", rest.GetNextToken())
		for id, n := range seen {
			expect(t, n == 1, "ListSnapshots (all pages)", nil, rule("ListSnapshots", "paging lists every snapshot exactly once"), "snapshot %s %d times, want once", id, n)
		}
		for id := range ours {
			expect(t, seen[id] == 1, "ListSnapshots (all pages)", nil, rule("ListSnapshots", "paging lists every snapshot exactly once"), "snapshot %s %d times, want once", id, seen[id])
		}
	})
}

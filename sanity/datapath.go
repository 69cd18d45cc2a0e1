package sanity

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// chunk is the size of the data the data-path cases write.
const chunk = 4096

// dataPathCases write through published volumes and read back.
func dataPathCases(t *testing.T, s *suite) {
	s.needNode(t)
	s.needCtrl(t, ccCreate)
	s.run(t, "survives_republish", func(t *testing.T) {
		v := s.createVolume(t, s.createReq(s.name("data")))
		m := s.mountVolume(t, v, false)
		want := s.write(t, m, 0)
		s.unpublish(t, m)
		if m.staging != "" {
			s.unstage(t, m)
			s.stage(t, m)
		}
		s.nodePublish(t, m, false)
		s.read(t, m, 0, want, kube("PersistentVolume", "data written to a persistent volume is still there when a pod publishes it again after unpublish and unstage"))
	})
	s.run(t, "readonly_publish_refuses_writes", func(t *testing.T) {
		if s.access == BlockAccess {
			t.Skip("checked for mount volumes")
		}
		v := s.createVolume(t, s.createReq(s.name("ro")))
		m := s.mountVolume(t, v, true)
		err := s.cfg.NodeFS.WriteAt(m.data(s.access), []byte("x"), 0)
		expect(t, err != nil, "NodePublishVolume", s.publishReq(m, true), rule("NodePublishVolume", "readonly: the volume MUST be published read-only"),
			"a successful write through the read-only target, want it refused")
	})
	s.run(t, "block_device_full_size", func(t *testing.T) {
		if s.access != BlockAccess {
			t.Skip("checked for block volumes")
		}
		m := s.mountVolume(t, s.createVolume(t, s.createReq(s.name("blk"))), false)
		size, err := s.cfg.NodeFS.Capacity(m.target)
		if err != nil {
			t.Fatalf("reading the size of block device %s: %v", m.target, err)
		}
		expect(t, size >= s.cfg.VolumeSize, "NodePublishVolume", s.publishReq(m, false), rule("NodePublishVolume", "a block volume is a device of at least the capacity requested"),
			"device size %d, want >= %d", size, s.cfg.VolumeSize)
		off := s.cfg.VolumeSize - chunk
		want := s.write(t, m, off)
		s.read(t, m, off, want, rule("NodePublishVolume", "the SP places a usable block device at target_path"))
	})
	s.run(t, "snapshot_content", func(t *testing.T) {
		s.needCtrl(t, ccSnap)
		src := s.createVolume(t, s.createReq(s.name("snapdata")))
		m := s.mountVolume(t, src, false)
		want := s.write(t, m, 0)
		snap := s.createSnapshot(t, s.name("snapdata"), src.GetVolumeId())
		s.write(t, m, 0) // after the snapshot: must not show in it
		req := s.createReq(s.name("restored"))
		req.VolumeContentSource = snapSource(snap.GetSnapshotId())
		restored := s.mountVolume(t, s.createVolume(t, req), false)
		s.read(t, restored, 0, want, rule("CreateVolume", "a volume restored from a snapshot holds the source's data at snapshot time"))
	})
	s.run(t, "clone_content", func(t *testing.T) {
		s.needCtrl(t, ccClone)
		src := s.createVolume(t, s.createReq(s.name("clonedata")))
		m := s.mountVolume(t, src, false)
		want := s.write(t, m, 0)
		s.unpublish(t, m)
		req := s.createReq(s.name("cloned"))
		req.VolumeContentSource = volSource(src.GetVolumeId())
		clone := s.mountVolume(t, s.createVolume(t, req), false)
		s.read(t, clone, 0, want, rule("CreateVolume", "a clone holds the source volume's data"))
	})
	s.run(t, "expansion_visible_on_node", func(t *testing.T) {
		if !s.nodeCaps[ncExpand] && !s.hasCtrl(ccExpand) {
			t.Skip("driver advertises no expansion")
		}
		if !s.nodeCaps[ncExpand] {
			t.Skip("driver expands on the controller only; nothing to see on the node without NodeExpandVolume")
		}
		m, before, after := expandPublished(t, s)
		expect(t, after > before, "NodeExpandVolume", nil, rule("NodeExpandVolume", "after expansion the filesystem or device on the node is larger"),
			"capacity at %s %d after expansion, %d before; want it larger", m.target, after, before)
		if s.access == BlockAccess {
			expect(t, after >= s.cfg.ExpandSize, "NodeExpandVolume", nil, rule("NodeExpandVolume", "a block device grows to the requested size"),
				"device size %d, want >= %d", after, s.cfg.ExpandSize)
		}
	})
	s.run(t, "stats_track_writes", func(t *testing.T) {
		s.needNode(t, ncStats)
		if s.access == BlockAccess {
			t.Skip("used bytes are tracked for mount volumes")
		}
		m := s.mountVolume(t, s.createVolume(t, s.createReq(s.name("statw"))), false)
		req := &csi.NodeGetVolumeStatsRequest{VolumeId: m.vol.GetVolumeId(), VolumePath: m.target}
		used := func() int64 {
			resp, err := call(s, s.node.NodeGetVolumeStats, req)
			must(t, "NodeGetVolumeStats", req, err, rule("NodeGetVolumeStats", "MUST succeed for a published volume"))
			for _, u := range resp.GetUsage() {
				if u.GetUnit() == csi.VolumeUsage_BYTES {
					return u.GetUsed()
				}
			}
			return 0
		}
		// A volume that shares a filesystem with others (a directory
		// volume without a quota reports its host filesystem) sees their
		// writes and deletes too, so one measurement can be off by what
		// they did meanwhile. Up to three fresh chunks are written, each
		// measured alone; one that shows must do. A driver whose used
		// bytes do not follow writes fails all three.
		n := min(s.cfg.VolumeSize/4, 4<<20)
		var tries []string
		for i := range int64(3) {
			before := used()
			buf := make([]byte, n)
			_, _ = rand.Read(buf)
			if err := s.cfg.NodeFS.WriteAt(m.data(s.access), buf, i*n); err != nil {
				t.Fatalf("writing %d bytes through %s: %v", n, m.target, err)
			}
			after := used()
			if after-before >= n*3/4 {
				return
			}
			tries = append(tries, fmt.Sprintf("%d before, %d after", before, after))
		}
		expect(t, false, "NodeGetVolumeStats", req, rule("NodeGetVolumeStats", "used bytes reflect the data on the volume"),
			"used bytes after writing %d bytes three times (%s); want them to grow by about what was written", n, strings.Join(tries, "; "))
	})
}

// write writes a fresh random chunk at off of m's data path.
func (s *suite) write(t *testing.T, m *mounted, off int64) []byte {
	t.Helper()
	b := make([]byte, chunk)
	_, _ = rand.Read(b)
	if err := s.cfg.NodeFS.WriteAt(m.data(s.access), b, off); err != nil {
		t.Fatalf("writing through published volume %s at %s: %v", m.vol.GetVolumeId(), m.target, err)
	}
	return b
}

// read checks that m's data path holds want at off.
func (s *suite) read(t *testing.T, m *mounted, off int64, want []byte, ruleText string) {
	t.Helper()
	got, err := s.cfg.NodeFS.ReadAt(m.data(s.access), len(want), off)
	if err != nil {
		t.Errorf("reading through published volume %s at %s: %v\n\trule: %s", m.vol.GetVolumeId(), m.target, err, ruleText)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("volume %s: got different data at %s offset %d than was written (%d of %d bytes differ)\n\trule: %s",
			m.vol.GetVolumeId(), m.target, off, diffCount(got, want), len(want), ruleText)
	}
}

func diffCount(a, b []byte) int {
	n := max(len(a), len(b)) - min(len(a), len(b))
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

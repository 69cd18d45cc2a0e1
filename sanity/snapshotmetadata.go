package sanity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// snapshotMetadataCases cover the SnapshotMetadata service on block
// volumes: data is written through a published block device, snapshots are
// taken, and the streamed metadata is checked against the spec's rules and
// against what was written.
func snapshotMetadataCases(t *testing.T, s *suite) {
	if !s.plugin[csi.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE] {
		t.Skip("driver does not advertise SNAPSHOT_METADATA_SERVICE")
	}
	if s.access != BlockAccess {
		t.Skip("checked for block volumes")
	}
	s.needCtrl(t, ccCreate, ccSnap)
	s.needNode(t)
	sm := csi.NewSnapshotMetadataClient(s.in.conn)
	// far is a second written offset, well away from the first.
	far := s.cfg.VolumeSize / 2 / chunk * chunk

	// written returns a snapshot of a volume with chunks written at 0 and
	// far, the volume and its published device.
	written := func(t *testing.T) (*csi.Volume, *mounted, *csi.Snapshot) {
		v := s.createVolume(t, s.createReq(s.name("smeta")))
		m := s.mountVolume(t, v, false)
		s.write(t, m, 0)
		s.write(t, m, far)
		return v, m, s.createSnapshot(t, s.name("smeta"), v.GetVolumeId())
	}
	allocated := func(t *testing.T, req *csi.GetMetadataAllocatedRequest) (blockMetadata, error) {
		t.Helper()
		req.Secrets = s.cfg.Secrets
		return readMetadata(s, req, req.GetStartingOffset(), req.GetMaxResults(), func(ctx context.Context) (func() (*csi.GetMetadataAllocatedResponse, error), error) {
			st, err := sm.GetMetadataAllocated(ctx, req)
			if err != nil {
				return nil, err
			}
			return st.Recv, nil
		})
	}
	delta := func(t *testing.T, req *csi.GetMetadataDeltaRequest) (blockMetadata, error) {
		t.Helper()
		req.Secrets = s.cfg.Secrets
		return readMetadata(s, req, req.GetStartingOffset(), req.GetMaxResults(), func(ctx context.Context) (func() (*csi.GetMetadataDeltaResponse, error), error) {
			st, err := sm.GetMetadataDelta(ctx, req)
			if err != nil {
				return nil, err
			}
			return st.Recv, nil
		})
	}

	s.run(t, "allocated_ranges_valid", func(t *testing.T) {
		v, _, snap := written(t)
		req := &csi.GetMetadataAllocatedRequest{SnapshotId: snap.GetSnapshotId()}
		md, err := allocated(t, req)
		must(t, "GetMetadataAllocated", req, err, rule("GetMetadataAllocated", "MUST succeed for an existing snapshot"))
		md.check(t, "GetMetadataAllocated", req)
		if c := v.GetCapacityBytes(); c > 0 {
			expect(t, md.capacity == c, "GetMetadataAllocated", req, rule("GetMetadataAllocated", "volume_capacity_bytes is the capacity of the underlying volume"),
				"volume_capacity_bytes %d, want the volume's %d", md.capacity, c)
		}
		for _, off := range []int64{0, far} {
			expect(t, md.covers(off, chunk), "GetMetadataAllocated", req, rule("GetMetadataAllocated", "the allocated ranges include every range written before the snapshot"),
				"ranges %s do not cover the %d bytes written at %d", md, chunk, off)
		}
	})
	s.run(t, "allocated_starting_offset", func(t *testing.T) {
		_, _, snap := written(t)
		req := &csi.GetMetadataAllocatedRequest{SnapshotId: snap.GetSnapshotId(), StartingOffset: far / 2}
		md, err := allocated(t, req)
		must(t, "GetMetadataAllocated", req, err, rule("GetMetadataAllocated", "MUST succeed for an existing snapshot"))
		md.check(t, "GetMetadataAllocated", req)
		expect(t, md.covers(far, chunk), "GetMetadataAllocated", req, rule("GetMetadataAllocated", "the allocated ranges from starting_offset include every range written there"),
			"ranges %s from %d do not cover the %d bytes written at %d", md, req.GetStartingOffset(), chunk, far)
	})
	s.run(t, "allocated_max_results", func(t *testing.T) {
		_, _, snap := written(t)
		req := &csi.GetMetadataAllocatedRequest{SnapshotId: snap.GetSnapshotId(), MaxResults: 1}
		md, err := allocated(t, req)
		must(t, "GetMetadataAllocated", req, err, rule("GetMetadataAllocated", "MUST succeed for an existing snapshot"))
		md.check(t, "GetMetadataAllocated", req) // includes ≤ max_results per message
	})
	s.run(t, "delta_identical_empty", func(t *testing.T) {
		v, _, base := written(t)
		target := s.createSnapshot(t, s.name("smeta"), v.GetVolumeId())
		req := &csi.GetMetadataDeltaRequest{BaseSnapshotId: base.GetSnapshotId(), TargetSnapshotId: target.GetSnapshotId()}
		md, err := delta(t, req)
		must(t, "GetMetadataDelta", req, err, rule("GetMetadataDelta", "MUST succeed for two snapshots of one volume"))
		md.check(t, "GetMetadataDelta", req)
		expect(t, len(md.ranges) == 0, "GetMetadataDelta", req, rule("GetMetadataDelta", "the delta lists the ranges that changed between the snapshots"),
			"ranges %s between two snapshots with no write in between, want none", md)
	})
	s.run(t, "delta_shows_write", func(t *testing.T) {
		v, m, base := written(t)
		mid := s.cfg.VolumeSize / 4 / chunk * chunk
		s.write(t, m, mid)
		target := s.createSnapshot(t, s.name("smeta"), v.GetVolumeId())
		req := &csi.GetMetadataDeltaRequest{BaseSnapshotId: base.GetSnapshotId(), TargetSnapshotId: target.GetSnapshotId()}
		md, err := delta(t, req)
		must(t, "GetMetadataDelta", req, err, rule("GetMetadataDelta", "MUST succeed for two snapshots of one volume"))
		md.check(t, "GetMetadataDelta", req)
		expect(t, md.covers(mid, chunk), "GetMetadataDelta", req, rule("GetMetadataDelta", "the delta includes every range written between the snapshots"),
			"ranges %s do not cover the %d bytes written at %d", md, chunk, mid)
		expect(t, !md.overlaps(0, chunk), "GetMetadataDelta", req, rule("GetMetadataDelta", "the delta lists the ranges that changed, not unchanged ones"),
			"ranges %s include offset 0, written before both snapshots", md)
		// From starting_offset past the write: nothing before it.
		req2 := proto.Clone(req).(*csi.GetMetadataDeltaRequest)
		req2.StartingOffset = mid + chunk
		md2, err := delta(t, req2)
		must(t, "GetMetadataDelta", req2, err, rule("GetMetadataDelta", "MUST succeed for two snapshots of one volume"))
		md2.check(t, "GetMetadataDelta", req2)
	})
	s.run(t, "errors", func(t *testing.T) {
		_, _, snap := written(t)
		for _, tc := range []struct {
			name string
			req  *csi.GetMetadataAllocatedRequest
			code codes.Code
			rule string
		}{
			{"no snapshot_id", &csi.GetMetadataAllocatedRequest{}, codes.InvalidArgument, "snapshot_id is REQUIRED"},
			{"unknown snapshot", &csi.GetMetadataAllocatedRequest{SnapshotId: s.name("missing")}, codes.NotFound, "an invalid snapshot_id is NOT_FOUND"},
			{"negative starting_offset", &csi.GetMetadataAllocatedRequest{SnapshotId: snap.GetSnapshotId(), StartingOffset: -chunk}, codes.OutOfRange, "a negative starting_offset is OUT_OF_RANGE"},
			{"starting_offset beyond the volume", &csi.GetMetadataAllocatedRequest{SnapshotId: snap.GetSnapshotId(), StartingOffset: 1 << 62}, codes.OutOfRange, "a starting_offset beyond the volume size is OUT_OF_RANGE"},
		} {
			_, err := allocated(t, tc.req)
			expect(t, status.Code(err) == tc.code, "GetMetadataAllocated", tc.req, rule("GetMetadataAllocated", tc.rule),
				"%s: got %v, want %s", tc.name, err, tc.code)
		}
		req := &csi.GetMetadataDeltaRequest{BaseSnapshotId: s.name("missing"), TargetSnapshotId: snap.GetSnapshotId()}
		_, err := delta(t, req)
		expect(t, status.Code(err) == codes.NotFound, "GetMetadataDelta", req, rule("GetMetadataDelta", "an invalid base_snapshot_id is NOT_FOUND"),
			"got %v, want NotFound", err)
	})
}

// blockMetadata is what one SnapshotMetadata stream returned, with the
// spec violations found while reading it.
type blockMetadata struct {
	ranges   [][2]int64 // byte_offset, size_bytes
	capacity int64
	problems []string
}

func (b blockMetadata) String() string {
	if len(b.ranges) > 8 {
		return fmt.Sprintf("%v … (%d ranges)", b.ranges[:8], len(b.ranges))
	}
	return fmt.Sprint(b.ranges)
}

// check reports the violations found while reading.
func (b blockMetadata) check(t *testing.T, rpc string, req proto.Message) {
	t.Helper()
	for _, p := range b.problems {
		t.Error(describe(rpc, req, nil, "block metadata that obeys the spec's rules", rule(rpc, p)))
	}
}

// covers reports whether one range holds all of [off, off+n).
func (b blockMetadata) covers(off, n int64) bool {
	for _, r := range b.ranges {
		if r[0] <= off && off+n <= r[0]+r[1] {
			return true
		}
	}
	return false
}

// overlaps reports whether any range intersects [off, off+n).
func (b blockMetadata) overlaps(off, n int64) bool {
	for _, r := range b.ranges {
		if r[0] < off+n && off < r[0]+r[1] {
			return true
		}
	}
	return false
}

type metadataMessage interface {
	GetBlockMetadataType() csi.BlockMetadataType
	GetVolumeCapacityBytes() int64
	GetBlockMetadata() []*csi.BlockMetadata
}

// readMetadata reads one stream to its end and checks every message
// against the spec's rules for it: one type and capacity throughout,
// constant sizes for FIXED_LENGTH, at most max_results ranges per message,
// ranges of positive size inside the volume, strictly increasing and not
// overlapping, the first ending after starting_offset.
func readMetadata[M metadataMessage](s *suite, req proto.Message, start int64, maxResults int32, open func(context.Context) (func() (M, error), error)) (blockMetadata, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
	defer cancel()
	var b blockMetadata
	recv, err := open(ctx)
	if err != nil {
		return b, err
	}
	var typ csi.BlockMetadataType
	var fixed, end int64
	for i := 0; ; i++ {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		bad := func(format string, args ...any) { b.problems = append(b.problems, fmt.Sprintf(format, args...)) }
		if i == 0 {
			typ, b.capacity = m.GetBlockMetadataType(), m.GetVolumeCapacityBytes()
			if typ != csi.BlockMetadataType_FIXED_LENGTH && typ != csi.BlockMetadataType_VARIABLE_LENGTH {
				bad("block_metadata_type is REQUIRED (got %v)", typ)
			}
			if b.capacity <= 0 {
				bad("volume_capacity_bytes is REQUIRED (got %d)", b.capacity)
			}
		} else if m.GetBlockMetadataType() != typ || m.GetVolumeCapacityBytes() != b.capacity {
			bad("block_metadata_type and volume_capacity_bytes are the same in all messages (message %d: %v, %d after %v, %d)",
				i, m.GetBlockMetadataType(), m.GetVolumeCapacityBytes(), typ, b.capacity)
		}
		if maxResults > 0 && len(m.GetBlockMetadata()) > int(maxResults) {
			bad("at most max_results (%d) tuples per message (message %d has %d)", maxResults, i, len(m.GetBlockMetadata()))
		}
		for _, r := range m.GetBlockMetadata() {
			off, size := r.GetByteOffset(), r.GetSizeBytes()
			switch {
			case size <= 0:
				bad("size_bytes MUST be greater than zero (range at %d has %d)", off, size)
			case off < 0 || off > b.capacity-size:
				bad("ranges lie inside the volume (range [%d,+%d) on %d bytes)", off, size, b.capacity)
			case len(b.ranges) > 0 && off < end:
				bad("byte_offset strictly increasing and ranges not overlapping, also across messages (range at %d after one ending at %d)", off, end)
			case len(b.ranges) == 0 && off+size <= start:
				bad("no tuple ends before starting_offset %d (first range [%d,+%d))", start, off, size)
			case typ == csi.BlockMetadataType_FIXED_LENGTH && fixed != 0 && size != fixed:
				bad("FIXED_LENGTH: size_bytes is constant (%d after %d)", size, fixed)
			}
			fixed, end = size, off+size
			b.ranges = append(b.ranges, [2]int64{off, size})
		}
	}
}

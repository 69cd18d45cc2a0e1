package journal

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"slices"
	"sort"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// Fingerprint returns a SHA-256 digest of the parts of a create request that
// decide what object it makes, so a retry can be told from a conflicting
// request with the same name. It understands *csi.CreateVolumeRequest,
// *csi.CreateSnapshotRequest and *csi.CreateVolumeGroupSnapshotRequest and
// reports false for anything else.
//
// Covered: for volumes the capacity range, parameters, mutable parameters,
// capabilities (as a set), content source and accessibility requirements
// (requisite as a set, preferred in order); for snapshots the source volume,
// parameters and accessibility requirements; for group snapshots the source
// volumes (as a set) and parameters. Never covered: the name (it is the key)
// and secrets (they rotate, and must not leave a trace). The encoding is
// this package's own, length-prefixed and versioned, so digests stay stable
// across protobuf library versions.
//
// Equality is stricter than the spec's "compatible": a retry whose
// accessibility requirements changed (say, a node joined the cluster between
// attempts) gets AlreadyExists. Drivers that prefer the spec's looser rule
// supply their own Options.Fingerprint, for example one that clears
// AccessibilityRequirements on a copy of the request before calling this.
func Fingerprint(req any) ([]byte, bool) {
	f := fingerprinter{h: sha256.New()}
	switch r := req.(type) {
	case *csi.CreateVolumeRequest:
		if r == nil {
			return nil, false
		}
		f.str("csikit/volume/v1")
		f.i64(r.GetCapacityRange().GetRequiredBytes())
		f.i64(r.GetCapacityRange().GetLimitBytes())
		f.strMap(r.GetParameters())
		f.strMap(r.GetMutableParameters())
		caps := make([][]byte, 0, len(r.GetVolumeCapabilities()))
		for _, c := range r.GetVolumeCapabilities() {
			caps = append(caps, capabilityBytes(c))
		}
		f.set(caps)
		src := r.GetVolumeContentSource()
		switch {
		case src.GetSnapshot() != nil:
			f.str("snapshot")
			f.str(src.GetSnapshot().GetSnapshotId())
		case src.GetVolume() != nil:
			f.str("volume")
			f.str(src.GetVolume().GetVolumeId())
		default:
			f.str("")
		}
		f.topology(r.GetAccessibilityRequirements())
	case *csi.CreateSnapshotRequest:
		if r == nil {
			return nil, false
		}
		f.str("csikit/snapshot/v1")
		f.str(r.GetSourceVolumeId())
		f.strMap(r.GetParameters())
		f.topology(r.GetAccessibilityRequirements())
	case *csi.CreateVolumeGroupSnapshotRequest:
		if r == nil {
			return nil, false
		}
		f.str("csikit/group-snapshot/v1")
		ids := make([][]byte, 0, len(r.GetSourceVolumeIds()))
		for _, id := range dedup(r.GetSourceVolumeIds()) {
			ids = append(ids, []byte(id))
		}
		f.set(ids)
		f.strMap(r.GetParameters())
	default:
		return nil, false
	}
	return f.h.Sum(nil), true
}

type fingerprinter struct{ h hash.Hash }

func (f fingerprinter) u64(v uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	f.h.Write(b[:])
}

func (f fingerprinter) i64(v int64)    { f.u64(uint64(v)) }
func (f fingerprinter) bytes(b []byte) { f.u64(uint64(len(b))); f.h.Write(b) }
func (f fingerprinter) str(s string)   { f.bytes([]byte(s)) }
func (f fingerprinter) strs(s []string) {
	f.u64(uint64(len(s)))
	for _, x := range s {
		f.str(x)
	}
}

func (f fingerprinter) strMap(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	f.u64(uint64(len(keys)))
	for _, k := range keys {
		f.str(k)
		f.str(m[k])
	}
}

// set writes byte strings in sorted order, so their order does not matter.
func (f fingerprinter) set(items [][]byte) {
	slices.SortFunc(items, bytes.Compare)
	f.u64(uint64(len(items)))
	for _, it := range items {
		f.bytes(it)
	}
}

func (f fingerprinter) topology(t *csi.TopologyRequirement) {
	if t == nil {
		f.str("")
		return
	}
	f.str("topology")
	req := make([][]byte, 0, len(t.GetRequisite()))
	for _, s := range t.GetRequisite() {
		req = append(req, segmentsBytes(s.GetSegments()))
	}
	f.set(req)
	f.u64(uint64(len(t.GetPreferred())))
	for _, s := range t.GetPreferred() {
		f.bytes(segmentsBytes(s.GetSegments()))
	}
}

// sub encodes a nested value into its own byte string.
func sub(write func(fingerprinter)) []byte {
	var buf bytes.Buffer
	write(fingerprinter{h: writerHash{&buf}})
	return buf.Bytes()
}

func segmentsBytes(m map[string]string) []byte {
	return sub(func(f fingerprinter) { f.strMap(m) })
}

func capabilityBytes(c *csi.VolumeCapability) []byte {
	return sub(func(f fingerprinter) {
		f.i64(int64(c.GetAccessMode().GetMode()))
		switch {
		case c.GetBlock() != nil:
			f.str("block")
		case c.GetMount() != nil:
			m := c.GetMount()
			f.str("mount")
			f.str(m.GetFsType())
			f.strs(m.GetMountFlags())
			f.str(m.GetVolumeMountGroup())
		default:
			f.str("")
		}
	})
}

// writerHash lets fingerprinter write into a buffer; only Write is used.
type writerHash struct{ *bytes.Buffer }

func (writerHash) Sum(b []byte) []byte { return b }
func (writerHash) Size() int           { return 0 }
func (writerHash) BlockSize() int      { return 1 }

// dedup drops repeated IDs, keeping the first of each.
func dedup(ids []string) []string {
	out := make([]string, 0, len(ids))
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			out = append(out, id)
		}
	}
	return out
}

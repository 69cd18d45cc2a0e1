package journal_test

import (
	"bytes"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/journal"
)

func mountCap(fs string, mode csi.VolumeCapability_AccessMode_Mode, flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs, MountFlags: flags}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func topo(kv ...string) *csi.Topology {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &csi.Topology{Segments: m}
}

func baseVolume() *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:          "pvc-1",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30, LimitBytes: 2 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{
			mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
			{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}},
		},
		Parameters:        map[string]string{"pool": "a", "type": "ssd"},
		MutableParameters: map[string]string{"iops": "100"},
		Secrets:           map[string]string{"key": "s3cr3t"},
		AccessibilityRequirements: &csi.TopologyRequirement{
			Requisite: []*csi.Topology{topo("zone", "a"), topo("zone", "b")},
			Preferred: []*csi.Topology{topo("zone", "a"), topo("zone", "b")},
		},
	}
}

func fp(t *testing.T, req any) []byte {
	t.Helper()
	f, ok := journal.Fingerprint(req)
	if !ok || len(f) != 32 {
		t.Fatalf("Fingerprint(%T): got %x, %v; want 32 bytes, true", req, f, ok)
	}
	return f
}

func TestFingerprintVolume(t *testing.T) {
	base := fp(t, baseVolume())
	same := map[string]func(r *csi.CreateVolumeRequest){
		"name":    func(r *csi.CreateVolumeRequest) { r.Name = "other" },
		"secrets": func(r *csi.CreateVolumeRequest) { r.Secrets = map[string]string{"key": "rotated"} },
		"capability order": func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities[0], r.VolumeCapabilities[1] = r.VolumeCapabilities[1], r.VolumeCapabilities[0]
		},
		"requisite order":   func(r *csi.CreateVolumeRequest) { q := r.AccessibilityRequirements.Requisite; q[0], q[1] = q[1], q[0] },
		"parameters copied": func(r *csi.CreateVolumeRequest) { r.Parameters = map[string]string{"type": "ssd", "pool": "a"} },
	}
	for name, change := range same {
		r := baseVolume()
		change(r)
		if got := fp(t, r); !bytes.Equal(got, base) {
			t.Errorf("changing %s: got a different fingerprint, want the same", name)
		}
	}
	differ := map[string]func(r *csi.CreateVolumeRequest){
		"required bytes":      func(r *csi.CreateVolumeRequest) { r.CapacityRange.RequiredBytes++ },
		"limit bytes":         func(r *csi.CreateVolumeRequest) { r.CapacityRange.LimitBytes = 0 },
		"no capacity":         func(r *csi.CreateVolumeRequest) { r.CapacityRange = nil },
		"parameter value":     func(r *csi.CreateVolumeRequest) { r.Parameters["pool"] = "b" },
		"parameter key/value": func(r *csi.CreateVolumeRequest) { r.Parameters = map[string]string{"pool": "assd", "type": ""} },
		"mutable parameter":   func(r *csi.CreateVolumeRequest) { r.MutableParameters = nil },
		"fs type": func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities[0] = mountCap("xfs", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
		},
		"mount flags": func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities[0] = mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, "noatime")
		},
		"access mode": func(r *csi.CreateVolumeRequest) {
			r.VolumeCapabilities[0] = mountCap("ext4", csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY)
		},
		"one capability less": func(r *csi.CreateVolumeRequest) { r.VolumeCapabilities = r.VolumeCapabilities[:1] },
		"clone source": func(r *csi.CreateVolumeRequest) {
			r.VolumeContentSource = cloneVol("x", "v1").VolumeContentSource
		},
		"snapshot source": func(r *csi.CreateVolumeRequest) {
			r.VolumeContentSource = restoreVol("x", "v1").VolumeContentSource
		},
		"requisite": func(r *csi.CreateVolumeRequest) {
			r.AccessibilityRequirements.Requisite = r.AccessibilityRequirements.Requisite[:1]
		},
		"preferred order": func(r *csi.CreateVolumeRequest) { p := r.AccessibilityRequirements.Preferred; p[0], p[1] = p[1], p[0] },
		"no topology":     func(r *csi.CreateVolumeRequest) { r.AccessibilityRequirements = nil },
	}
	seen := map[string]string{string(base): "base"}
	for name, change := range differ {
		r := baseVolume()
		change(r)
		got := string(fp(t, r))
		if prev, dup := seen[got]; dup {
			t.Errorf("changing %s: got the fingerprint of %s, want a new one", name, prev)
		}
		seen[got] = name
	}
}

func TestFingerprintSnapshots(t *testing.T) {
	s := &csi.CreateSnapshotRequest{Name: "s", SourceVolumeId: "v", Parameters: map[string]string{"a": "b"}, Secrets: map[string]string{"k": "v"}}
	base := fp(t, s)
	s2 := &csi.CreateSnapshotRequest{Name: "s2", SourceVolumeId: "v", Parameters: map[string]string{"a": "b"}}
	if !bytes.Equal(fp(t, s2), base) {
		t.Error("snapshot name/secrets changed the fingerprint")
	}
	s2.SourceVolumeId = "w"
	if bytes.Equal(fp(t, s2), base) {
		t.Error("snapshot source changed: got the same fingerprint")
	}
	// A snapshot and a volume never share a fingerprint.
	if bytes.Equal(fp(t, &csi.CreateSnapshotRequest{}), fp(t, &csi.CreateVolumeRequest{})) {
		t.Error("empty snapshot and volume requests: got the same fingerprint")
	}
	g1 := fp(t, &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{"a", "b"}})
	g2 := fp(t, &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{"b", "a", "a"}})
	g3 := fp(t, &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: []string{"a"}})
	if !bytes.Equal(g1, g2) || bytes.Equal(g1, g3) {
		t.Error("group snapshot: source order or duplicates matter, or a missing source does not")
	}
	for _, odd := range []any{nil, "x", (*csi.CreateVolumeRequest)(nil), &csi.DeleteVolumeRequest{}} {
		if f, ok := journal.Fingerprint(odd); ok {
			t.Errorf("Fingerprint(%T): got %x, true; want false", odd, f)
		}
	}
}

func BenchmarkFingerprintVolume(b *testing.B) {
	r := baseVolume()
	b.ReportAllocs()
	for b.Loop() {
		journal.Fingerprint(r)
	}
}

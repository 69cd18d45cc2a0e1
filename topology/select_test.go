package topology_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit/topology"
)

// z is the spec examples' {"region": "R1", "zone": zone}.
func z(zone string) *csi.Topology {
	return &csi.Topology{Segments: map[string]string{"region": "R1", "zone": zone}}
}

func zs(zones ...string) []*csi.Topology {
	out := make([]*csi.Topology, len(zones))
	for i, name := range zones {
		out[i] = z(name)
	}
	return out
}

func names(ts []*csi.Topology) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		seg := t.GetSegments()
		out[i] = seg["zone"]
		if out[i] == "" {
			out[i] = fmt.Sprint(seg)
		}
	}
	return out
}

func without(ts []*csi.Topology, zones ...string) []*csi.Topology {
	return slices.DeleteFunc(slices.Clone(ts), func(t *csi.Topology) bool { return slices.Contains(zones, t.GetSegments()["zone"]) })
}

var allZones = zs("Z1", "Z2", "Z3", "Z4", "Z5")

func TestSelectSpecExamples(t *testing.T) {
	for _, tc := range []struct {
		name      string
		requisite []string
		preferred []string
		available []*csi.Topology
		n         int
		want      []string
		code      codes.Code
	}{
		// requisite, x == n
		{name: "x==n single zone", requisite: []string{"Z2"}, available: allZones, n: 1, want: []string{"Z2"}},
		{name: "x==n two zones", requisite: []string{"Z2", "Z3"}, available: allZones, n: 2, want: []string{"Z2", "Z3"}},
		{name: "x==n backend lacks one", requisite: []string{"Z2", "Z3"}, available: without(allZones, "Z3"), n: 2, code: codes.ResourceExhausted},
		// requisite, x < n
		{name: "x<n single zone picks either", requisite: []string{"Z2", "Z3"}, available: allZones, n: 1, want: []string{"Z2"}},
		{name: "x<n single zone falls to the other", requisite: []string{"Z2", "Z3"}, available: without(allZones, "Z2"), n: 1, want: []string{"Z3"}},
		{name: "x<n two of three", requisite: []string{"Z2", "Z3", "Z4"}, available: allZones, n: 2, want: []string{"Z2", "Z3"}},
		{name: "x<n two of three without Z3", requisite: []string{"Z2", "Z3", "Z4"}, available: without(allZones, "Z3"), n: 2, want: []string{"Z2", "Z4"}},
		{name: "x<n only one servable", requisite: []string{"Z2", "Z3", "Z4"}, available: zs("Z1", "Z4", "Z5"), n: 2, code: codes.ResourceExhausted},
		// requisite, x > n
		{name: "x>n second zone chosen freely", requisite: []string{"Z2"}, available: zs("Z4", "Z2"), n: 2, want: []string{"Z2", "Z4"}},
		{name: "x>n requisite not servable", requisite: []string{"Z2"}, available: zs("Z4", "Z5"), n: 2, code: codes.ResourceExhausted},
		{name: "x>n not enough segments", requisite: []string{"Z2"}, available: zs("Z2"), n: 2, code: codes.ResourceExhausted},
		// preferred, example 1
		{name: "ex1 preferred first", requisite: []string{"Z2", "Z3"}, preferred: []string{"Z3"}, available: allZones, n: 1, want: []string{"Z3"}},
		{name: "ex1 fall back", requisite: []string{"Z2", "Z3"}, preferred: []string{"Z3"}, available: without(allZones, "Z3"), n: 1, want: []string{"Z2"}},
		// preferred, example 2
		{name: "ex2 first preference", requisite: []string{"Z2", "Z3", "Z4", "Z5"}, preferred: []string{"Z4", "Z2"}, available: allZones, n: 1, want: []string{"Z4"}},
		{name: "ex2 second preference", requisite: []string{"Z2", "Z3", "Z4", "Z5"}, preferred: []string{"Z4", "Z2"}, available: without(allZones, "Z4"), n: 1, want: []string{"Z2"}},
		{name: "ex2 any other requisite", requisite: []string{"Z2", "Z3", "Z4", "Z5"}, preferred: []string{"Z4", "Z2"}, available: without(allZones, "Z4", "Z2"), n: 1, want: []string{"Z3"}},
		{name: "ex2 never outside requisite", requisite: []string{"Z2", "Z3", "Z4", "Z5"}, preferred: []string{"Z4", "Z2"}, available: zs("Z1"), n: 1, code: codes.ResourceExhausted},
		// preferred, example 3 (two zones)
		{name: "ex3 both preferred", requisite: []string{"Z2", "Z3", "Z4", "Z5"}, preferred: []string{"Z5", "Z3"}, available: allZones, n: 2, want: []string{"Z5", "Z3"}},
		{name: "ex3 Z5 and another", requisite: []string{"Z2", "Z3", "Z4", "Z5"}, preferred: []string{"Z5", "Z3"}, available: without(allZones, "Z3"), n: 2, want: []string{"Z5", "Z2"}},
		{name: "ex3 Z3 and another", requisite: []string{"Z2", "Z3", "Z4", "Z5"}, preferred: []string{"Z5", "Z3"}, available: without(allZones, "Z5"), n: 2, want: []string{"Z3", "Z2"}},
		{name: "ex3 other requisite", requisite: []string{"Z2", "Z3", "Z4", "Z5"}, preferred: []string{"Z5", "Z3"}, available: without(allZones, "Z5", "Z3"), n: 2, want: []string{"Z2", "Z4"}},
		// preferred without requisite: any available segment, preferred first
		{name: "preferred only", preferred: []string{"Z4"}, available: allZones, n: 2, want: []string{"Z4", "Z1"}},
		{name: "preferred only, not available", preferred: []string{"Z9"}, available: zs("Z1"), n: 1, want: []string{"Z1"}},
		// no requirement at all
		{name: "no requirement", available: allZones, n: 3, want: []string{"Z1", "Z2", "Z3"}},
		{name: "no requirement, too few", available: zs("Z1"), n: 2, code: codes.ResourceExhausted},
		{name: "nothing available", requisite: []string{"Z1"}, n: 1, code: codes.ResourceExhausted},
		// caller errors
		{name: "n zero", available: allZones, n: 0, code: codes.InvalidArgument},
		{name: "preferred outside requisite", requisite: []string{"Z2"}, preferred: []string{"Z3"}, available: allZones, n: 1, code: codes.InvalidArgument},
		{name: "duplicates count once", available: zs("Z1", "Z1"), n: 2, code: codes.ResourceExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req *csi.TopologyRequirement
			if tc.requisite != nil || tc.preferred != nil {
				req = &csi.TopologyRequirement{Requisite: zs(tc.requisite...), Preferred: zs(tc.preferred...)}
			}
			reqBefore := proto.Clone(req)
			availBefore := make([]*csi.Topology, len(tc.available))
			for i, a := range tc.available {
				availBefore[i] = proto.Clone(a).(*csi.Topology)
			}

			got, err := topology.Select(req, tc.available, tc.n)
			if status.Code(err) != tc.code {
				t.Fatalf("got code %v (%v), want %v", status.Code(err), err, tc.code)
			}
			if tc.code == codes.OK && !slices.Equal(names(got), tc.want) {
				t.Errorf("got %v, want %v", names(got), tc.want)
			}
			for _, g := range got {
				if !slices.Contains(tc.available, g) {
					t.Errorf("got %v, want one of the caller's own available entries", g)
				}
			}
			if !proto.Equal(req, reqBefore) {
				t.Errorf("requirement modified: got %v, want %v", req, reqBefore)
			}
			for i := range availBefore {
				if !proto.Equal(tc.available[i], availBefore[i]) {
					t.Errorf("available[%d] modified", i)
				}
			}
		})
	}
}

func TestRankFallbackOrder(t *testing.T) {
	req := &csi.TopologyRequirement{Requisite: zs("Z2", "Z3", "Z4", "Z5"), Preferred: zs("Z5", "Z3")}
	got, err := topology.Rank(req, allZones)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"Z5", "Z3", "Z2", "Z4"}; !slices.Equal(names(got), want) {
		t.Errorf("got %v, want %v", names(got), want)
	}
	if _, err := topology.Rank(req, zs("Z1")); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("nothing in requisite: got %v, want ResourceExhausted", err)
	}
	got, err = topology.Rank(nil, zs("Z3", "Z1", "Z3"))
	if err != nil || !slices.Equal(names(got), []string{"Z3", "Z1"}) {
		t.Errorf("no requirement: got %v, %v, want [Z3 Z1], nil", names(got), err)
	}
}

func TestSelectSegmentGranularity(t *testing.T) {
	region := &csi.Topology{Segments: map[string]string{"region": "R1"}}
	rack := &csi.Topology{Segments: map[string]string{"region": "R1", "zone": "Z2", "rack": "K7"}}
	req := &csi.TopologyRequirement{Requisite: zs("Z2")}

	// A regional backend segment reaches every zone in the region.
	got, err := topology.Select(req, []*csi.Topology{region}, 1)
	if err != nil || len(got) != 1 || got[0] != region {
		t.Errorf("coarser segment: got %v, %v, want the region segment", got, err)
	}
	// A rack-local segment does not reach every node of zone Z2.
	if _, err := topology.Select(req, []*csi.Topology{rack}, 1); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("finer segment: got %v, want ResourceExhausted", err)
	}
	// One regional segment serves several requisite terms at once.
	got, err = topology.Select(&csi.TopologyRequirement{Requisite: zs("Z2", "Z3")}, []*csi.Topology{region, z("Z9")}, 2)
	if err != nil || len(got) != 2 || got[0] != region {
		t.Errorf("one segment covering two terms: got %v, %v, want region then another", got, err)
	}
}

func TestSelectRejectsNil(t *testing.T) {
	for name, tc := range map[string]struct {
		req   *csi.TopologyRequirement
		avail []*csi.Topology
	}{
		"nil requisite": {&csi.TopologyRequirement{Requisite: []*csi.Topology{nil}}, allZones},
		"nil preferred": {&csi.TopologyRequirement{Preferred: []*csi.Topology{nil}}, allZones},
		"nil available": {nil, []*csi.Topology{z("Z1"), nil}},
	} {
		_, err := topology.Select(tc.req, tc.avail, 1)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want InvalidArgument", name, err)
		}
	}
}

func TestSelectErrorMessageBounded(t *testing.T) {
	var many []*csi.Topology
	for i := range 100 {
		many = append(many, z(fmt.Sprintf("Q%d", i)))
	}
	_, err := topology.Select(&csi.TopologyRequirement{Requisite: zs("Z1")}, many, 1)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("got %v, want ResourceExhausted", err)
	}
	if msg := status.Convert(err).Message(); len(msg) > 1000 || !strings.Contains(msg, "92 more") {
		t.Errorf("got a %d-byte message %q, want a bounded one that counts the rest", len(msg), msg)
	}
}

func BenchmarkSelect(b *testing.B) {
	var avail, reqs []*csi.Topology
	for i := range 64 {
		avail = append(avail, z(fmt.Sprintf("Z%d", i)))
	}
	for i := 0; i < 32; i += 2 {
		reqs = append(reqs, z(fmt.Sprintf("Z%d", i)))
	}
	req := &csi.TopologyRequirement{Requisite: reqs, Preferred: []*csi.Topology{reqs[7], reqs[3], reqs[11], reqs[1]}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := topology.Select(req, avail, 2); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSelectSingleZone(b *testing.B) {
	req := &csi.TopologyRequirement{Requisite: zs("Z2", "Z3"), Preferred: zs("Z3")}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := topology.Select(req, allZones, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// Many available segments take the indexed de-duplication path.
func TestSelectManyDuplicates(t *testing.T) {
	var avail []*csi.Topology
	for i := range 30 {
		avail = append(avail, z(fmt.Sprintf("Z%d", i%10)), &csi.Topology{Segments: map[string]string{"zone": fmt.Sprintf("Z%d", i%10)}})
	}
	got, err := topology.Rank(nil, avail)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 20 {
		t.Errorf("got %d distinct segments, want 20", len(got))
	}
	if _, err := topology.Select(nil, avail, 21); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("21 of 20 distinct: got %v, want ResourceExhausted", err)
	}
}

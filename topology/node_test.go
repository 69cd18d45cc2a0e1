package topology_test

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/topology"
)

func TestNode(t *testing.T) {
	got, err := topology.Node(topology.NodeOptions{
		Segments: map[string]string{"topology.block.vendor.example/zone": "z1"},
		NodeKey:  topology.Key("topology.block.vendor.example", "node"),
		NodeID:   "worker-3",
	})
	if err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	want := map[string]string{"topology.block.vendor.example/zone": "z1", "topology.block.vendor.example/node": "worker-3"}
	if len(got.GetSegments()) != len(want) {
		t.Fatalf("got %v, want %v", got.GetSegments(), want)
	}
	for k, v := range want {
		if got.GetSegments()[k] != v {
			t.Errorf("segment %q: got %q, want %q", k, got.GetSegments()[k], v)
		}
	}

	if got, err := topology.Node(topology.NodeOptions{}); got != nil || err != nil {
		t.Errorf("no segments: got %v, %v, want nil, nil", got, err)
	}

	segs := map[string]string{"zone": "z1"}
	if _, err := topology.Node(topology.NodeOptions{Segments: segs, NodeKey: "node", NodeID: "n1"}); err != nil {
		t.Fatal(err)
	}
	if len(segs) != 1 {
		t.Errorf("Segments modified: got %v, want the caller's map untouched", segs)
	}

	_, err = topology.Node(topology.NodeOptions{Segments: map[string]string{"node": "a"}, NodeKey: "node", NodeID: "b"})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("conflicting node key: got %v, want InvalidArgument", err)
	}
	_, err = topology.Node(topology.NodeOptions{NodeKey: "x/node", NodeID: "has space"})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("bad node ID: got %v, want InvalidArgument", err)
	}
}

func TestValidate(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		seg map[string]string
		ok  bool
	}{
		{map[string]string{"zone": "z1"}, true},
		{map[string]string{"com.company.example/zone": "Z_1.a-b", "com.company.example/rack": "R3"}, true},
		{map[string]string{"Zone_1.x": "v"}, true},
		{map[string]string{strings.Repeat("a", 63): strings.Repeat("b", 63)}, true},
		{nil, true},
		{map[string]string{long: "v"}, false},
		{map[string]string{"zone": long}, false},
		{map[string]string{"zone": ""}, false},
		{map[string]string{"": "v"}, false},
		{map[string]string{"-zone": "v"}, false},
		{map[string]string{"zone-": "v"}, false},
		{map[string]string{"zo ne": "v"}, false},
		{map[string]string{"zone": "-v"}, false},
		{map[string]string{"zone": "a/b"}, false},
		{map[string]string{"Com.Example/zone": "v"}, false},
		{map[string]string{"com..example/zone": "v"}, false},
		{map[string]string{"-com.example/zone": "v"}, false},
		{map[string]string{"com_example/zone": "v"}, false},
		{map[string]string{"/zone": "v"}, false},
		{map[string]string{"a/b/c": "v"}, false},
		{map[string]string{strings.Repeat("a", 64) + "/zone": "v"}, false},
		{map[string]string{"a.example/zone": "v", "b.example/rack": "v"}, false},
		{map[string]string{"zone": "v", "Zone": "w"}, false},
	} {
		err := topology.Validate(&csi.Topology{Segments: tc.seg})
		if tc.ok && err != nil {
			t.Errorf("%v: got %v, want nil", tc.seg, err)
		}
		if !tc.ok && status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: got %v, want InvalidArgument", tc.seg, err)
		}
	}
}

func TestAccessible(t *testing.T) {
	node := &csi.Topology{Segments: map[string]string{"region": "R1", "zone": "Z2", "node": "n1"}}
	for _, tc := range []struct {
		name   string
		volume []*csi.Topology
		want   bool
	}{
		{"no topology", nil, true},
		{"same zone", zs("Z2"), true},
		{"other zone", zs("Z3"), false},
		{"one of two zones", zs("Z3", "Z2"), true},
		{"region-wide", []*csi.Topology{{Segments: map[string]string{"region": "R1"}}}, true},
		{"other node", []*csi.Topology{{Segments: map[string]string{"node": "n2"}}}, false},
		{"key the node lacks", []*csi.Topology{{Segments: map[string]string{"zone": "Z2", "rack": "K1"}}}, false},
	} {
		if got := topology.Accessible(tc.volume, node); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

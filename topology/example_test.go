package topology_test

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/topology"
)

func zone(name string) *csi.Topology {
	return &csi.Topology{Segments: map[string]string{"topology.block.vendor.example/zone": name}}
}

func ExampleSelect() {
	// CreateVolume's accessibility_requirements, as the external-provisioner
	// sends them for a pod scheduled into zone b.
	req := &csi.TopologyRequirement{
		Requisite: []*csi.Topology{zone("a"), zone("b"), zone("c")},
		Preferred: []*csi.Topology{zone("b"), zone("a")},
	}
	// The zones the backend has capacity in.
	available := []*csi.Topology{zone("a"), zone("c")}

	chosen, err := topology.Select(req, available, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(chosen[0].GetSegments())

	_, err = topology.Select(req, []*csi.Topology{zone("d")}, 1)
	fmt.Println(err != nil)
	// Output:
	// map[topology.block.vendor.example/zone:a]
	// true
}

func ExampleNode() {
	t, err := topology.Node(topology.NodeOptions{
		Segments: map[string]string{"topology.block.vendor.example/zone": "a"},
		NodeKey:  topology.Key("topology.block.vendor.example", "node"),
		NodeID:   "worker-1",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Return it in NodeGetInfoResponse.AccessibleTopology.
	resp := &csi.NodeGetInfoResponse{NodeId: "worker-1", AccessibleTopology: t}
	fmt.Println(resp.GetAccessibleTopology().GetSegments())
	// Output: map[topology.block.vendor.example/node:worker-1 topology.block.vendor.example/zone:a]
}

// Validate checks a node's or volume's topology against the spec's key and
// value rules before it is advertised; the error names the offending key.
func ExampleValidate() {
	fmt.Println(topology.Validate(zone("eu-west-1b")))
	fmt.Println(topology.Validate(&csi.Topology{Segments: map[string]string{"Zone/Name": "a"}}))
	fmt.Println(topology.Validate(&csi.Topology{Segments: map[string]string{"topology.block.vendor.example/zone": "-b"}}) != nil)
	// Output:
	// <nil>
	// rpc error: code = InvalidArgument desc = topology key "Zone/Name": got prefix "Zone", want at most 63 lower-case alphanumerics, '-' or '.', alphanumeric at both ends
	// true
}

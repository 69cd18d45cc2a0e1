package csitest_test

import (
	"context"
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csitest"
)

// A driver's RPCs called through csikit's full chain, in-process and
// without root.
func ExampleStart() {
	s, err := csitest.Start(&node{published: map[string]string{}}, csikit.Options{NodeID: "node-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	caps, err := s.Node.NodeGetCapabilities(context.Background(), &csi.NodeGetCapabilitiesRequest{})
	fmt.Println(len(caps.GetCapabilities()), err)
	info, err := s.Node.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	fmt.Println(info.GetNodeId(), err)
	// Output:
	// 0 <nil>
	// node-1 <nil>
}

package kube_test

import (
	"testing"

	"github.com/csikit/csikit/sanity/kube"
)

// Two kubelets on one host: node-1 (Options.NodeName) and node-2. A node
// plugin for node-2 registers in node-2's registration directory; a test
// of node loss freezes node-2, taints it out-of-service and thaws it
// once the pod has moved.
func ExampleKubeletOptions_extraNodes() {
	var t *testing.T // the test's *testing.T
	env := kube.Start(t, kube.Options{
		Endpoint: "unix:///tmp/csi-example/csi.sock", DriverName: "block.vendor.example",
		NodeName: "node-1",
		ExtraArgs: map[string][]string{kube.BinControllerManager: {
			// Added to the environment's controllers: what the
			// non-graceful node shutdown needs besides attach/detach.
			"--controllers=taint-eviction-controller,pod-garbage-collector-controller,statefulset-controller",
			"--node-monitor-grace-period=12s",
		}},
		Kubelet: &kube.KubeletOptions{ExtraNodes: []kube.NodeOptions{{Name: "node-2"}}},
	})
	node2, _ := env.KubeletNode("node-2")
	_ = node2.RegistrationDir // where node-2's plugin registers
	thaw, err := env.FreezeNode("node-2")
	if err != nil {
		t.Fatal(err)
	}
	// ... wait for node-2 NotReady, taint it
	// node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, wait for
	// the pod on node-1, remove the taint ...
	if err := thaw(); err != nil {
		t.Fatal(err)
	}
}

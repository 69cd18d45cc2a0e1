package kube

import (
	"fmt"
	"regexp"
)

// NodeOptions describe one more node of the kubelet mode
// (KubeletOptions.ExtraNodes).
type NodeOptions struct {
	// Name is the Node's name (required): a DNS label, distinct from
	// Options.NodeName and the other extra nodes.
	Name string
	// Labels are the Node's labels besides kubernetes.io/hostname (e.g. a
	// topology label for a driver's node plugin on this node). Empty: the
	// labels of Options.NodeTopology, so that topology-aware scheduling
	// treats it as the first node's peer.
	Labels map[string]string
	// NodeIP is the Node's InternalIP and the address its kubelet's API
	// listens on (see KubeletOptions.NodeIP; default: that one, as every
	// node is on the same host, told apart by its kubelet's port).
	NodeIP string
}

// KubeletNode is one node of the kubelet mode: where its kubelet and
// containerd keep their state (everything below Env.Dir).
type KubeletNode struct {
	// Name is the Node's name.
	Name string
	// KubeletDir is the kubelet's --root-dir: pods' volumes are
	// published below <KubeletDir>/pods.
	KubeletDir string
	// RegistrationDir is the kubelet's plugin registration directory: a
	// node plugin for this node registers by creating
	// <RegistrationDir>/<driver>-reg.sock.
	RegistrationDir string
	// PodLogDir is the kubelet's podLogsDir.
	PodLogDir string
	// ContainerdAddress is the socket of the node's containerd.
	ContainerdAddress string
}

var nodeNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// checkExtraNodes validates KubeletOptions.ExtraNodes against the first
// node's name.
func checkExtraNodes(first string, extra []NodeOptions) error {
	seen := map[string]bool{first: true}
	for _, x := range extra {
		if !nodeNameRE.MatchString(x.Name) {
			return fmt.Errorf("kube: KubeletOptions.ExtraNodes: node name %q is not a DNS label", x.Name)
		}
		if seen[x.Name] {
			return fmt.Errorf("kube: KubeletOptions.ExtraNodes: node name %q is used twice (Options.NodeName is %q)", x.Name, first)
		}
		seen[x.Name] = true
	}
	return nil
}

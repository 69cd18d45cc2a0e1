package kube

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// outOfService is the taint of Kubernetes' non-graceful node shutdown: on
// a NotReady Node it forces the pods' eviction and the detach of their
// volumes without the node's kubelet (SetOutOfService).
var outOfService = corev1.Taint{Key: "node.kubernetes.io/out-of-service", Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// WaitNodeCondition waits up to timeout for the Ready condition of the
// Node name to have status want: ConditionUnknown once a node stopped
// reporting (FreezeNode, after the controller manager's
// --node-monitor-grace-period), ConditionTrue once it is back.
func (e *Env) WaitNodeCondition(t testing.TB, timeout time.Duration, name string, want corev1.ConditionStatus) {
	t.Helper()
	WaitFor(t, timeout, "Node "+name+" Ready="+string(want), func(ctx context.Context) (bool, string, error) {
		nd, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, cd := range nd.Status.Conditions {
			if cd.Type == corev1.NodeReady {
				return cd.Status == want, fmt.Sprintf("Ready=%s (%s), taints %v", cd.Status, cd.Message, nd.Spec.Taints), nil
			}
		}
		return false, "no Ready condition", nil
	})
}

// SetOutOfService adds (on) or removes the taint
// node.kubernetes.io/out-of-service=nodeshutdown:NoExecute on the Node name,
// as an administrator does to tell Kubernetes a NotReady node is really
// down and after it is back. It retries (a conflicting update among them)
// for up to timeout, then fails t.
func (e *Env) SetOutOfService(t testing.TB, timeout time.Duration, name string, on bool) {
	t.Helper()
	WaitFor(t, timeout, "taint of Node "+name+" updated", func(ctx context.Context) (bool, string, error) {
		nd, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		var ts []corev1.Taint
		for _, x := range nd.Spec.Taints {
			if x.Key != outOfService.Key {
				ts = append(ts, x)
			}
		}
		if on {
			ts = append(ts, outOfService)
		}
		nd.Spec.Taints = ts
		_, err = e.Client.CoreV1().Nodes().Update(ctx, nd, metav1.UpdateOptions{})
		return err == nil, fmt.Sprint(err), nil // a conflict retries
	})
}

package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/csikit/csikit/sanity/kube"
)

// TestKubeletTwoNodes runs two kubelets on this host (node-1 and, from
// KubeletOptions.ExtraNodes, node-2), each with its own containerd: a pod
// pinned to each node runs on it, and neither kubelet kills the other's
// containers. Then the non-graceful node shutdown of Kubernetes: a
// StatefulSet's pod runs on node-2, node-2 is frozen (FreezeNode) until
// it is NotReady, tainted node.kubernetes.io/out-of-service:NoExecute,
// and the pod is force-deleted and recreated on node-1; node-2, untainted
// and thawed, turns Ready again.
func TestKubeletTwoNodes(t *testing.T) {
	kubeletPrereqs(t)
	t0 := time.Now()
	env := kube.Start(t, kube.Options{
		DriverName: "none.csikit.example", Sidecars: []string{},
		ExtraArgs: map[string][]string{kube.BinControllerManager: {
			// Added to the harness's list (a repeated string-slice flag appends).
			"--controllers=taint-eviction-controller,pod-garbage-collector-controller,statefulset-controller",
			// NotReady 12 s after the last status (default 50 s).
			"--node-monitor-grace-period=12s",
		}},
		Kubelet: &kube.KubeletOptions{ExtraNodes: []kube.NodeOptions{{Name: "node-2"}}, CheckLeftovers: true},
	})
	t.Logf("two-node environment started in %s", time.Since(t0).Round(time.Millisecond))
	createNamespace(t, env)
	h := &h{t: t, env: env, ctx: context.Background()}
	for _, name := range []string{"node-1", "node-2"} {
		kn, ok := env.KubeletNode(name)
		if !ok || kn.Name != name || kn.KubeletDir == "" || kn.ContainerdAddress == "" {
			t.Fatalf("KubeletNode(%q) = %+v, %v", name, kn, ok)
		}
	}
	n1, _ := env.KubeletNode("node-1")
	n2, _ := env.KubeletNode("node-2")
	if n1.KubeletDir == n2.KubeletDir || n1.ContainerdAddress == n2.ContainerdAddress {
		t.Fatalf("the nodes share state: %+v %+v", n1, n2)
	}
	if n1.KubeletDir != env.KubeletDir() || n1.ContainerdAddress != env.ContainerdAddress() {
		t.Errorf("KubeletNode(node-1) = %+v, want the first node's KubeletDir %s and containerd %s", n1, env.KubeletDir(), env.ContainerdAddress())
	}
	if _, ok := env.KubeletNode("node-3"); ok {
		t.Error("KubeletNode(node-3) found a node that does not exist")
	}

	// A pod on each node, placed by the scheduler.
	for _, name := range []string{"node-1", "node-2"} {
		p := h.podSpec("on-"+name, "sleep 3600")
		p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": name}
		h.createPod(p)
	}
	for _, name := range []string{"node-1", "node-2"} {
		if p := h.ready("on-" + name); p.Spec.NodeName != name {
			t.Fatalf("pod on-%s runs on %s", name, p.Spec.NodeName)
		}
	}
	// Each kubelet cleans up, every 2 s, the pods of its runtime it does
	// not know: with one containerd they would kill each other's.
	time.Sleep(12 * time.Second)
	for _, name := range []string{"node-1", "node-2"} {
		p := h.get("on-" + name)
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != 1 ||
			p.Status.ContainerStatuses[0].RestartCount != 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			t.Fatalf("pod on-%s not running undisturbed after 12 s: %s", name, h.podState(h.ctx, p))
		}
	}
	h.deletePod("on-node-1")

	// The non-graceful node shutdown: a StatefulSet's pod preferring node-2.
	c := env.Client
	if _, err := c.AppsV1().StatefulSets(ns).Create(h.ctx, h.webSet("sleep 3600", "node-2"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := h.ready("web-0")
	if old.Spec.NodeName != "node-2" {
		t.Fatalf("web-0 scheduled to %s, want node-2", old.Spec.NodeName)
	}

	tFreeze := time.Now()
	thaw := freeze(t, env, "node-2")
	env.WaitNodeCondition(t, kubeletWait, "node-2", corev1.ConditionUnknown)
	tNotReady := time.Now()
	env.SetOutOfService(t, wait, "node-2", true)
	moved := h.recreated("web-0", old.UID, "node-1")
	t.Logf("non-graceful shutdown: node-2 NotReady %s after the freeze; web-0 Ready on node-1 %s after the taint (%s in all)",
		tNotReady.Sub(tFreeze).Round(time.Millisecond), time.Since(tNotReady).Round(time.Millisecond), time.Since(tFreeze).Round(time.Millisecond))

	// The admin's side after the node is back: untaint, and it is Ready.
	env.SetOutOfService(t, wait, "node-2", false)
	thaw()
	env.WaitNodeCondition(t, kubeletWait, "node-2", corev1.ConditionTrue)
	if p := h.get("web-0"); p.UID != moved.UID || p.Spec.NodeName != "node-1" {
		t.Errorf("web-0 after node-2 came back: uid %s on %s, want %s on node-1", p.UID, p.Spec.NodeName, moved.UID)
	}
}

// webSet is the StatefulSet "web" of one busybox pod running script
// (restarted if it ends), preferring the node named prefer.
func (h *h) webSet(script, prefer string) *appsv1.StatefulSet {
	one := int32(1)
	pod := h.podSpec("web", script)
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
			Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{prefer}}}},
		}}}}
	labels := map[string]string{"app": "web"}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &one, ServiceName: "web",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		},
	}
}

// freeze hangs the node (Env.FreezeNode) and returns the thaw for the test
// to call once; a node the test did not thaw is thawed at cleanup.
func freeze(t *testing.T, env *kube.Env, node string) (thaw func()) {
	t.Helper()
	th, err := env.FreezeNode(node)
	if err != nil {
		t.Fatal(err)
	}
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			if err := th(); err != nil {
				t.Error(err)
			}
		}
	})
	return func() {
		t.Helper()
		thawed = true
		if err := th(); err != nil {
			t.Fatal(err)
		}
	}
}

// recreated waits for the pod name, replaced after its node was lost (a
// UID other than old), to be Ready on node, and returns it.
func (h *h) recreated(name string, old types.UID, node string) *corev1.Pod {
	h.t.Helper()
	var moved *corev1.Pod
	kube.WaitFor(h.t, kubeletWait, name+" recreated on "+node+" and Ready", func(ctx context.Context) (bool, string, error) {
		p, err := h.env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, name + ": " + err.Error(), nil
		}
		if p.UID == old {
			return false, fmt.Sprintf("%s still the old pod (deletion %v): %s", name, p.DeletionTimestamp, h.podState(ctx, p)), nil
		}
		moved = p
		for _, cd := range p.Status.Conditions {
			if cd.Type == corev1.PodReady && cd.Status == corev1.ConditionTrue {
				return p.Spec.NodeName == node, "on " + p.Spec.NodeName, nil
			}
		}
		return false, "on " + p.Spec.NodeName + ": " + h.podState(ctx, p), nil
	})
	if moved.Spec.NodeName != node {
		h.t.Fatalf("%s recreated on %s, want %s", name, moved.Spec.NodeName, node)
	}
	return moved
}

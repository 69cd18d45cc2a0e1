package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a test of a driver deployed with its own manifests needs (the
// kubelet mode runs the manifests' DaemonSet and Deployment for real):
// apply them with the test's substitutions, wait for their pods and the
// driver's registration, show the pods' logs when the test fails, and
// delete the claims through the deployed driver at the end.

// ApplyFile creates the objects of the manifest file at path as they are
// (Apply: strictly decoded, a misspelt field fails), after replacing, in
// order, each old string of the pairs in oldnew (old, new, old, new, …,
// as strings.NewReplacer takes them) with its new one in the file's text.
// Every replacement is logged with its count; an old string the text does
// not hold fails t, as the test's substitutions no longer match the
// manifest (e.g. its image or host paths changed).
func (e *Env) ApplyFile(t testing.TB, path string, oldnew ...string) {
	t.Helper()
	if len(oldnew)%2 == 1 {
		t.Fatalf("kube: ApplyFile %s: odd number of replacement strings %q", path, oldnew)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for i := 0; i < len(oldnew); i += 2 {
		old, repl := oldnew[i], oldnew[i+1]
		n := strings.Count(text, old)
		if n == 0 {
			t.Fatalf("%s: %q not found: the test's substitutions no longer match the manifest", path, old)
		}
		text = strings.ReplaceAll(text, old, repl)
		t.Logf("%s: replaced %q with %q (%d times)", path, old, repl, n)
	}
	if err := e.Apply(context.Background(), []byte(text), nil); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// PodsReady is a condition for WaitFor and Poll: whether exactly want pods
// match the label selector in namespace, each running with all of its
// containers ready, and at least containers of them. Its state counts the
// ready pods and lists waiting and terminated containers (with reason,
// message and restarts) and the pods' conditions that are not true.
func (e *Env) PodsReady(ctx context.Context, namespace, selector string, want, containers int) (bool, string, error) {
	pods, err := e.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return false, "", err
	}
	var states []string
	ready := 0
	for _, p := range pods.Items {
		n := 0
		for _, s := range p.Status.ContainerStatuses {
			if s.Ready {
				n++
			}
			switch {
			case s.State.Waiting != nil:
				states = append(states, fmt.Sprintf("%s/%s waiting %s %s (restarts %d)", p.Name, s.Name, s.State.Waiting.Reason, s.State.Waiting.Message, s.RestartCount))
			case s.State.Terminated != nil:
				states = append(states, fmt.Sprintf("%s/%s terminated %d %s", p.Name, s.Name, s.State.Terminated.ExitCode, s.State.Terminated.Message))
			}
		}
		if p.Status.Phase == corev1.PodRunning && n >= containers && n == len(p.Status.ContainerStatuses) {
			ready++
		}
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				states = append(states, fmt.Sprintf("%s %s=%s %s", p.Name, c.Type, c.Status, c.Message))
			}
		}
	}
	return ready == want && len(pods.Items) == want, fmt.Sprintf("%d of %d pods ready: %v", ready, len(pods.Items), states), nil
}

// WaitDriverRegistered waits until the CSINode of node lists driver (its
// node plugin registered with kubelet) and returns that entry, with the
// node ID the plugin reported.
func (e *Env) WaitDriverRegistered(t testing.TB, timeout time.Duration, node, driver string) storagev1.CSINodeDriver {
	t.Helper()
	var found storagev1.CSINodeDriver
	WaitFor(t, timeout, "driver "+driver+" registered on "+node+" (its CSINode)", func(ctx context.Context) (bool, string, error) {
		cn, err := e.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, "no CSINode", nil
		}
		for _, d := range cn.Spec.Drivers {
			if d.Name == driver {
				found = d
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("drivers %+v", cn.Spec.Drivers), nil
	})
	return found
}

// LogPods logs to t the last lines of every container log of the pods of
// namespace that kubelet wrote (the kubelet mode's PodLogDir; nothing
// otherwise): call it in a Cleanup when t failed, to see why a deployed
// driver's pod did not come up.
func (e *Env) LogPods(t testing.TB, namespace string, lines int) {
	t.Helper()
	if e.PodLogDir() == "" {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(e.PodLogDir(), namespace+"_*", "*", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		t.Logf("--- %s:\n%s", strings.TrimPrefix(l, e.PodLogDir()+"/"), lastLines(b, lines))
	}
}

// DeleteClaims deletes every pod (DeletePods: in the kubelet mode, their
// volumes are unpublished by kubelet) and then every PersistentVolumeClaim
// of namespace, and waits up to timeout until no PersistentVolume is left:
// the driver deleted the volumes. Call it while the driver still runs,
// e.g. in a Cleanup registered after the driver's, with the driver as a
// process of the test (DeletePods deletes every Deployment and DaemonSet,
// a deployed driver's too). Every failure is returned, joined.
func (e *Env) DeleteClaims(ctx context.Context, timeout time.Duration, namespace string) error {
	var errs []error
	if err := e.DeletePods(ctx, timeout); err != nil {
		errs = append(errs, err)
	}
	c := e.Client
	if err := c.CoreV1().PersistentVolumeClaims(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		errs = append(errs, fmt.Errorf("kube: delete the claims of %s: %w", namespace, err))
	}
	if err := Poll(ctx, timeout, func(ctx context.Context) (bool, string, error) {
		pvs, err := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var left []string
		for _, pv := range pvs.Items {
			left = append(left, pv.Name+"("+string(pv.Status.Phase)+")")
		}
		return len(left) == 0, fmt.Sprintf("PVs left: %v", left), nil
	}); err != nil {
		errs = append(errs, fmt.Errorf("kube: PersistentVolumes deleted: %w", err))
	}
	return errors.Join(errs...)
}

// HostIP returns the host's address on its default route (found with a
// UDP "connect", which sends nothing): for KubeletOptions.NodeIP, and for
// a storage backend the test runs on the host that pods must reach.
func HostIP() (string, error) {
	c, err := net.Dial("udp4", "203.0.113.1:9")
	if err != nil {
		return "", fmt.Errorf("kube: the host's address (its default route): %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/csikit/csikit/sanity/kube"
)

// fatalTB records the first Fatal of a helper under test and ends its
// goroutine, as testing.T does; everything else goes to the real test.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Fatal(args ...any) { f.fatal = fmt.Sprint(args...); runtime.Goexit() }
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// fatalOf runs fn with a fatalTB and returns what it failed with ("" if
// it returned).
func fatalOf(t *testing.T, fn func(tb testing.TB)) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.fatal
}

// TestApplyFile: the substitutions are made in order, each counted; an
// old string the file lacks, or an odd list, fails before anything is
// created.
func TestApplyFile(t *testing.T) {
	env := &kube.Env{Client: fake.NewClientset()}
	file := filepath.Join(t.TempDir(), "secret.yaml")
	doc := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: ns1\nstringData:\n  user: USER\n  pool: POOL\n  both: USER/POOL\n"
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		oldnew []string
		want   string
	}{
		"missing": {[]string{"USER", "tenant", "NOPE", "x"}, `"NOPE" not found`},
		"odd":     {[]string{"USER"}, "odd number"},
	} {
		if msg := fatalOf(t, func(tb testing.TB) { env.ApplyFile(tb, file, tc.oldnew...) }); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: failed with %q, want %q", name, msg, tc.want)
		}
		if _, err := env.Client.CoreV1().Secrets("ns1").Get(context.Background(), "creds", metav1.GetOptions{}); err == nil {
			t.Fatalf("%s: the Secret was created", name)
		}
	}
	// In order: POOL's replacement holds USER, which is replaced first.
	env.ApplyFile(t, file, "USER", "tenant", "POOL", "p-USER")
	s, err := env.Client.CoreV1().Secrets("ns1").Get(context.Background(), "creds", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.StringData; got["user"] != "tenant" || got["pool"] != "p-USER" || got["both"] != "tenant/p-USER" {
		t.Errorf("stringData %v", got)
	}
}

// TestPodsReady: ready means exactly want pods of the selector, each
// running with all containers ready and at least containers of them; the
// state names what is not.
func TestPodsReady(t *testing.T) {
	ctx := context.Background()
	pod := func(name string, running bool, ready ...bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns1", Labels: map[string]string{"app": "drv"}}}
		p.Status.Phase = corev1.PodPending
		if running {
			p.Status.Phase = corev1.PodRunning
		}
		for i, r := range ready {
			s := corev1.ContainerStatus{Name: fmt.Sprintf("c%d", i), Ready: r}
			if !r {
				s.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
				s.RestartCount = 3
			}
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, s)
		}
		return p
	}
	for name, tc := range map[string]struct {
		pods          []*corev1.Pod
		want, minimum int
		ready         bool
		state         string
	}{
		"ready":       {[]*corev1.Pod{pod("a", true, true, true)}, 1, 2, true, "1 of 1 pods ready"},
		"too few":     {[]*corev1.Pod{pod("a", true, true)}, 1, 2, false, "0 of 1 pods ready"},
		"crashing":    {[]*corev1.Pod{pod("a", true, true, false)}, 1, 1, false, "a/c1 waiting CrashLoopBackOff  (restarts 3)"},
		"pending":     {[]*corev1.Pod{pod("a", false, true)}, 1, 1, false, "0 of 1"},
		"one more":    {[]*corev1.Pod{pod("a", true, true), pod("b", true, true)}, 1, 1, false, "2 of 2 pods ready"},
		"none":        {nil, 1, 1, false, "0 of 0 pods ready"},
		"other label": {[]*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns1"}}}, 0, 0, true, "0 of 0"},
	} {
		env := &kube.Env{Client: fake.NewClientset()}
		for _, p := range tc.pods {
			if _, err := env.Client.CoreV1().Pods("ns1").Create(ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		ok, state, err := env.PodsReady(ctx, "ns1", "app=drv", tc.want, tc.minimum)
		if err != nil || ok != tc.ready || !strings.Contains(state, tc.state) {
			t.Errorf("%s: %v %q %v, want %v and a state with %q", name, ok, state, err, tc.ready, tc.state)
		}
	}
}

// TestNodeHelpers: WaitDriverRegistered returns the CSINode's entry;
// SetOutOfService adds and removes the taint, keeping the others;
// WaitNodeCondition sees the Ready condition.
func TestNodeHelpers(t *testing.T) {
	ctx := context.Background()
	env := &kube.Env{Client: fake.NewClientset(
		&storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Name: "other.example", NodeID: "x"}, {Name: "block.vendor.example", NodeID: "id-1"}}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
			Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "keep", Effect: corev1.TaintEffectNoSchedule}}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}},
	)}
	if d := env.WaitDriverRegistered(t, time.Second, "node-1", "block.vendor.example"); d.NodeID != "id-1" {
		t.Errorf("WaitDriverRegistered: %+v", d)
	}
	if msg := fatalOf(t, func(tb testing.TB) { env.WaitDriverRegistered(tb, 300*time.Millisecond, "node-1", "none.example") }); !strings.Contains(msg, "other.example") {
		t.Errorf("an unregistered driver: failed with %q, want the drivers listed", msg)
	}
	taints := func() []string {
		n, err := env.Client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range n.Spec.Taints {
			out = append(out, x.ToString())
		}
		return out
	}
	env.SetOutOfService(t, time.Second, "node-1", true)
	env.SetOutOfService(t, time.Second, "node-1", true) // once only
	if got := strings.Join(taints(), " "); got != "keep:NoSchedule node.kubernetes.io/out-of-service=nodeshutdown:NoExecute" {
		t.Errorf("taints after SetOutOfService(true): %s", got)
	}
	env.SetOutOfService(t, time.Second, "node-1", false)
	if got := strings.Join(taints(), " "); got != "keep:NoSchedule" {
		t.Errorf("taints after SetOutOfService(false): %s", got)
	}
	env.WaitNodeCondition(t, time.Second, "node-1", corev1.ConditionUnknown)
	if msg := fatalOf(t, func(tb testing.TB) { env.WaitNodeCondition(tb, 300*time.Millisecond, "node-1", corev1.ConditionTrue) }); !strings.Contains(msg, "Ready=Unknown") {
		t.Errorf("a node not Ready: failed with %q, want its condition", msg)
	}
}

// TestDeleteClaims: done when no PV is left; a PV the driver does not
// delete is named in the error. (The fake clientset's DeleteCollection
// deletes nothing: that pods and claims go is seen in the kubelet mode.)
func TestDeleteClaims(t *testing.T) {
	ctx := context.Background()
	env := &kube.Env{Client: fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns1"}})}
	if err := env.DeleteClaims(ctx, time.Second, "ns1"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.DeleteClaims(ctx, 300*time.Millisecond, "ns1"); err == nil || !strings.Contains(err.Error(), "pv-1(Released)") {
		t.Errorf("a PV left: %v, want an error naming it", err)
	}
}

// TestDeletePodsDeletesRecreatedPods: a pod that a controller recreates
// after DeletePods deleted its predecessor (a lagging deployment
// controller: here the first delete of the driver's controller pod brings
// a replacement) is deleted too, and DeletePods returns once no pod is
// left; the volume's consumer goes first.
func TestDeletePodsDeletesRecreatedPods(t *testing.T) {
	ctx := context.Background()
	consumer := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "user"},
		Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
	cs := fake.NewClientset(consumer, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "drv", Name: "controller-1"}})
	var deleted []string
	cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		name := a.(k8stesting.DeleteAction).GetName()
		deleted = append(deleted, name)
		if name == "controller-1" {
			if err := cs.Tracker().Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "drv", Name: "controller-2"}}); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil // the tracker deletes it
	})
	env := &kube.Env{Client: cs}
	if err := env.DeletePods(ctx, 10*time.Second); err != nil {
		t.Fatalf("DeletePods: %v", err)
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("%d pods left after DeletePods, first %s/%s", len(pods.Items), pods.Items[0].Namespace, pods.Items[0].Name)
	}
	if want := []string{"user", "controller-1", "controller-2"}; strings.Join(deleted, " ") != strings.Join(want, " ") {
		t.Errorf("pods deleted in the order %v, want %v", deleted, want)
	}
}

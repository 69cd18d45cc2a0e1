package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/csikit/csikit/internal/mountpoint"
	"github.com/csikit/csikit/k8s/registration"
	"github.com/csikit/csikit/sanity/kube"
)

// TestKubeletNodeLossVolume is the non-graceful node shutdown with a
// volume, on two kubelets of this host: a StatefulSet pod stamping
// "<pod UID> <n>" lines into a claim (examples/hostpath, directory kind,
// attach required) runs on node-2; node-2 is frozen (kubelet, containerd,
// the writer), turns NotReady, is tainted
// node.kubernetes.io/out-of-service=nodeshutdown:NoExecute; the pod is
// force-deleted, its VolumeAttachment detached (ControllerUnpublish) and
// the pod recreated on node-1 with the volume attached there, where every
// stamp written before the freeze is read back in order. Then node-2 is
// untainted and thawed: its kubelet unpublishes the old pod's volume.
//
// One hostpath process serves both nodes (its data is one host
// directory): node-2 gets the driver through a registration socket of its
// own pointing at the same endpoint, so both nodes report the same node
// ID and topology. hostpath does not fence: stamps the thawed writer adds
// before its kubelet kills it are counted and logged, not failed — with a
// fencing driver (csikit.Fencer) they would be refused.
func TestKubeletNodeLossVolume(t *testing.T) {
	kubeletPrereqs(t)
	dir, bin := buildHostpath(t)
	sock := filepath.Join(dir, "csi.sock")
	t0 := time.Now()
	env := kube.Start(t, kube.Options{
		Endpoint: "unix://" + sock, DriverName: hostpathName, NodeName: "node-1",
		Sidecars: []string{"csi-provisioner", "csi-attacher"},
		ExtraArgs: map[string][]string{kube.BinControllerManager: {
			"--controllers=taint-eviction-controller,pod-garbage-collector-controller,statefulset-controller",
			"--node-monitor-grace-period=12s",
		}},
		Kubelet: &kube.KubeletOptions{ExtraNodes: []kube.NodeOptions{{Name: "node-2"}}, CheckLeftovers: true},
	})
	t.Logf("two-node environment started in %s", time.Since(t0).Round(time.Millisecond))
	for _, m := range []string{"rbac.yaml", "csidriver.yaml", "storageclass.yaml"} {
		env.ApplyFile(t, hostpathDeploy(m))
	}
	createNamespace(t, env)
	p, err := kube.StartProcess(kube.ProcessOptions{
		Name: "hostpath", Path: bin, LogDir: env.Dir, Restart: true,
		Args: []string{
			"--endpoint=unix://" + sock, "--nodeid=node-1", "--state-dir=" + filepath.Join(dir, "state"), "--enable-attach",
			"--kubelet-registration-path=" + sock, "--kubelet-registration-dir=" + env.RegistrationDir(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stopAtCleanup(t, p)
	n2, _ := env.KubeletNode("node-2")
	reg, err := registration.New(registration.Options{DriverName: hostpathName, Endpoint: sock, Dir: n2.RegistrationDir})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stopReg := context.WithCancel(context.Background())
	regDone := make(chan error, 1)
	go func() { regDone <- reg.Run(rctx) }()
	t.Cleanup(func() {
		stopReg()
		if err := <-regDone; err != nil && rctx.Err() == nil {
			t.Error(err)
		}
	})
	h := &h{t: t, env: env, ctx: context.Background()}
	t.Cleanup(func() { (&kenv{env: env}).teardown(t) })
	for _, name := range []string{"node-1", "node-2"} {
		env.WaitDriverRegistered(t, kubeletWait, name, hostpathName)
	}

	c := env.Client
	sts := h.webSet(`i=0; while true; do i=$((i+1)); echo "$POD_UID $i" >> /data/stamps; sync; sleep 0.2; done`, "node-2")
	ctr := &sts.Spec.Template.Spec.Containers[0]
	ctr.Env = []corev1.EnvVar{{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}}
	ctr.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	sc := "csikit-hostpath"
	sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("16Mi")}},
		},
	}}
	if _, err := c.AppsV1().StatefulSets(ns).Create(h.ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := h.ready("web-0")
	if old.Spec.NodeName != "node-2" {
		t.Fatalf("web-0 scheduled to %s, want node-2", old.Spec.NodeName)
	}
	_, pv := h.bound("data-web-0")
	vaNodes := func(ctx context.Context) (map[string]bool, error) {
		vas, err := c.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string]bool{}
		for _, va := range vas.Items {
			if pvn := va.Spec.Source.PersistentVolumeName; pvn != nil && *pvn == pv.Name {
				out[va.Spec.NodeName] = va.Status.Attached
			}
		}
		return out, nil
	}
	kube.WaitFor(t, kubeletWait, "VolumeAttachment on node-2 attached", func(ctx context.Context) (bool, string, error) {
		m, err := vaNodes(ctx)
		return err == nil && len(m) == 1 && m["node-2"], fmt.Sprintf("attachments %v %v", m, err), nil
	})
	// The old pod's stamps, read on the host through node-2's publish path.
	oldFile := filepath.Join(n2.KubeletDir, "pods", string(old.UID), "volumes", "kubernetes.io~csi", pv.Name, "mount", "stamps")
	kube.WaitFor(t, kubeletWait, "5 stamps of web-0 on node-2", func(ctx context.Context) (bool, string, error) {
		b, err := os.ReadFile(oldFile)
		return err == nil && strings.Count(string(b), "\n") >= 5, fmt.Sprint(err), nil
	})

	tFreeze := time.Now()
	thaw := freeze(t, env, "node-2")
	b, err := os.ReadFile(oldFile)
	if err != nil {
		t.Fatal(err)
	}
	before := stampsOf(string(b), string(old.UID))
	env.WaitNodeCondition(t, kubeletWait, "node-2", corev1.ConditionUnknown)
	tNotReady := time.Now()
	env.SetOutOfService(t, wait, "node-2", true)
	tTaint := time.Now()
	moved := h.recreated("web-0", old.UID, "node-1")
	kube.WaitFor(t, kubeletWait, "VolumeAttachment moved to node-1", func(ctx context.Context) (bool, string, error) {
		m, err := vaNodes(ctx)
		return err == nil && len(m) == 1 && m["node-1"], fmt.Sprintf("attachments %v %v", m, err), nil
	})
	newFile := filepath.Join(env.KubeletDir(), "pods", string(moved.UID), "volumes", "kubernetes.io~csi", pv.Name, "mount", "stamps")
	kube.WaitFor(t, kubeletWait, "stamps of the new web-0 on node-1", func(ctx context.Context) (bool, string, error) {
		b, err := os.ReadFile(newFile)
		return err == nil && len(stampsOf(string(b), string(moved.UID))) >= 3, fmt.Sprint(err), nil
	})
	t.Logf("node loss with a volume: node-2 NotReady %s after the freeze; web-0 Ready on node-1, volume attached there, %s after the taint (%s in all)",
		tNotReady.Sub(tFreeze).Round(time.Millisecond), time.Since(tTaint).Round(time.Millisecond), time.Since(tFreeze).Round(time.Millisecond))
	b, err = os.ReadFile(newFile)
	if err != nil {
		t.Fatal(err)
	}
	after := stampsOf(string(b), string(old.UID))
	if len(after) < len(before) {
		t.Fatalf("node-1 reads %d stamps of the old pod, %d were written before the freeze", len(after), len(before))
	}
	for i, n := range after {
		if n != i+1 {
			t.Fatalf("old pod's stamps on node-1: #%d is %d: %v", i, n, after)
		}
	}

	// node-2 comes back: untainted, thawed; its kubelet kills the old pod
	// and unpublishes its volume.
	env.SetOutOfService(t, wait, "node-2", false)
	thaw()
	env.WaitNodeCondition(t, kubeletWait, "node-2", corev1.ConditionTrue)
	oldMount := filepath.Dir(oldFile)
	kube.WaitFor(t, kubeletWait, "node-2's kubelet unpublished the old pod's volume", func(ctx context.Context) (bool, string, error) {
		mps, err := mountpoint.Under(filepath.Join(n2.KubeletDir, "pods", string(old.UID)))
		return err == nil && len(mps) == 0, fmt.Sprintf("mounts %v %v (%s)", mps, err, oldMount), nil
	})
	b, err = os.ReadFile(newFile)
	if err != nil {
		t.Fatal(err)
	}
	late := len(stampsOf(string(b), string(old.UID))) - len(after)
	t.Logf("the thawed writer on node-2 added %d stamps after its pod was replaced (hostpath does not fence)", late)
}

// stampsOf returns the numbers of the lines "<uid> <n>" of uid, in file order.
func stampsOf(text, uid string) []int {
	var out []int
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == uid {
			if n, err := strconv.Atoi(f[1]); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

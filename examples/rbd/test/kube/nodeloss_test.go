//go:build linux

package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/sanity"
	"github.com/csikit/csikit/sanity/kube"
)

// nodeWait bounds each step of the node-loss scenario: a pod start with
// an rbd-fuse stage, a NotReady after the grace period, a detach.
const nodeWait = 3 * time.Minute

// TestKubeNodeLoss is the non-graceful node shutdown of an RBD volume on
// two kubelets of this host (sanity/kube's kubelet mode, node-b the first
// node, node-a an extra one), each with its own rbd node plugin (own
// state directory, so its own rbd-fuse, i.e. its own Ceph client),
// node-b's also serving the controller to csi-provisioner and
// csi-attacher:
//
//  1. A StatefulSet pod on node-a stamps "<pod UID> <n>" lines into its
//     claim, each followed by an fsync of the file.
//  2. node-a hangs: its kubelet, containerd, the writer, its node plugin
//     and its rbd-fuse are stopped (FreezeNode). The last stamp in the
//     frozen page cache is the last A may ever write.
//  3. node-a turns NotReady and is tainted
//     node.kubernetes.io/out-of-service=nodeshutdown:NoExecute: the pod
//     is force-deleted, the attach-detach controller force-detaches,
//     ControllerUnpublishVolume(node-a) fences A's client before it
//     answers, and the pod starts on node-b, where every fsynced stamp of
//     A is read back in order.
//  4. node-a wakes up while the pod runs on node-b: first its rbd-fuse
//     and the old writer alone, which writes on its fenced mount for 5 s,
//     then the rest (thaw); its kubelet kills the writer and, through its
//     node plugin, which finds the fenced rbd-fuse hung, unpublishes and
//     unstages.
//  5. The taint is removed and the fence lifted (the Fencing service's
//     Unfence, what `csikit unfence` calls).
//  6. The pod is deleted; the image, exported, checks clean (e2fsck -n),
//     and holds A's stamps up to the freeze — none later — and B's.
func TestKubeNodeLoss(t *testing.T) {
	if os.Getenv("CSIKIT_KUBE_KUBELET") == "" {
		t.Skip("the kubelet mode is opt-in: set CSIKIT_KUBE_KUBELET=1 (root, runc, containernetworking-plugins, busybox-static; test/ci.sh does)")
	}
	start := time.Now()
	c := cephtest.Require(t)
	cephtest.RequireRoot(t)
	if err := kube.NodePrereqs(kube.KubeletOptions{}); err != nil {
		cephtest.Skipf(t, "%v", err)
	}
	for _, tool := range []string{"rbd-fuse", "rbd", "e2fsck", "debugfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			cephtest.Skipf(t, "needs %s: %v", tool, err)
		}
	}
	binDir := kubeBinaries(t)
	bin := buildDriver(t)
	dir, err := os.MkdirTemp("", "rbd-nl-") // short: unix socket paths
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	// A pool of the test's own (rbd's other tests run beside it in CI, and
	// its sanity run fails on any image that appears in the cluster's pool)
	// and a user allowed only that pool, with `osd blocklist rm` on the
	// monitors, which Unfence needs.
	pool, secrets := cephtest.FencingTenantPool(t, c)
	sockB, sockA := filepath.Join(dir, "b.sock"), filepath.Join(dir, "a.sock")
	stateA, stateB := filepath.Join(dir, "state-a"), filepath.Join(dir, "state-b")
	env := kube.Start(t, kube.Options{
		Endpoint: "unix://" + sockB, DriverName: driverName, NodeName: "node-b", BinDir: binDir,
		Sidecars: []string{"csi-provisioner", "csi-attacher"},
		Timeout:  30 * time.Second,
		ExtraArgs: map[string][]string{kube.BinControllerManager: {
			"--controllers=taint-eviction-controller,pod-garbage-collector-controller,statefulset-controller",
			"--node-monitor-grace-period=12s",
		}},
		Kubelet: &kube.KubeletOptions{ExtraNodes: []kube.NodeOptions{{Name: "node-a"}}, CheckLeftovers: true},
	})
	t.Logf("two-node environment started in %s", time.Since(start).Round(time.Millisecond))
	applyDeploy(t, env, pool, secrets)
	if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nodeA, _ := env.KubeletNode("node-a")
	plugins := map[string]*kube.Process{}
	for _, n := range []struct{ name, sock, state, reg string }{
		{"node-b", sockB, stateB, env.RegistrationDir()},
		{"node-a", sockA, stateA, nodeA.RegistrationDir},
	} {
		p, err := kube.StartProcess(kube.ProcessOptions{
			Name: "rbd-" + n.name, Path: bin, LogDir: env.Dir, Restart: true,
			Args: []string{"--endpoint=unix://" + n.sock, "--nodeid=" + n.name, "--monitors=" + c.Monitors,
				"--pool=" + pool, "--state-dir=" + n.state, "--mapper=rbd-fuse",
				"--kubelet-registration-path=" + n.sock, "--kubelet-registration-dir=" + n.reg},
		})
		if err != nil {
			t.Fatal(err)
		}
		plugins[n.name] = p
		t.Cleanup(func() {
			if err := p.Stop(); err != nil {
				t.Error(err)
			}
			if t.Failed() {
				b, _ := os.ReadFile(p.LogPath)
				t.Logf("--- %s (started %d times):\n%s", p.Name, p.Starts(), tail(string(b), 40))
			}
		})
	}
	// Before the plugins stop (Cleanup is LIFO): pods and claims go while
	// the driver still serves.
	t.Cleanup(func() {
		if err := env.DeleteClaims(context.Background(), nodeWait, ns); err != nil {
			t.Errorf("teardown: %v", err)
		}
	})
	h := &h{t: t, env: env, ctx: context.Background(), pool: pool}
	for _, name := range []string{"node-a", "node-b"} {
		env.WaitDriverRegistered(t, nodeWait, name, driverName)
	}

	// 1. The writer on node-a.
	cl := env.Client
	if _, err := cl.AppsV1().StatefulSets(ns).Create(h.ctx, stampSet(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := h.podReady("web-0", "")
	if old.Spec.NodeName != "node-a" {
		t.Fatalf("web-0 scheduled to %s, want node-a", old.Spec.NodeName)
	}
	pv := h.pvOf("data-web-0")
	image := imageOf(t, pv.Spec.CSI.VolumeHandle)
	h.waitAttached(pv.Name, "node-a")
	oldFile := filepath.Join(nodeA.KubeletDir, "pods", string(old.UID), "volumes", "kubernetes.io~csi", pv.Name, "mount", "stamps")
	kube.WaitFor(t, nodeWait, "20 stamps of web-0 on node-a", func(ctx context.Context) (bool, string, error) {
		b, err := os.ReadFile(oldFile)
		return err == nil && len(stampsOf(string(b), string(old.UID))) >= 20, fmt.Sprint(err), nil
	})
	fuseA := fuseDaemons(stateA)
	if len(fuseA) == 0 {
		t.Fatalf("no rbd-fuse of node-a (state directory %s)", stateA)
	}

	// 2. node-a hangs.
	tFreeze := time.Now()
	thaw, err := env.FreezeNode("node-a", append([]int{plugins["node-a"].PID()}, fuseA...)...)
	if err != nil {
		t.Fatal(err)
	}
	thawed := false
	t.Cleanup(func() {
		if !thawed {
			if err := thaw(); err != nil {
				t.Error(err)
			}
		}
	})
	// The writer is stopped: what its page cache holds is all it wrote.
	// Reading it takes no I/O (the pages were just written), but a read
	// that misses would wait on the frozen rbd-fuse: bounded.
	frozen, err := readBounded(oldFile, 10*time.Second)
	if err != nil {
		t.Fatalf("reading node-a's stamps after the freeze: %v", err)
	}
	atFreeze := stampsOf(frozen, string(old.UID))
	last := atFreeze[len(atFreeze)-1]
	env.WaitNodeCondition(t, nodeWait, "node-a", corev1.ConditionUnknown)
	tNotReady := time.Now()

	// 3. The taint; the pod moves.
	env.SetOutOfService(t, wait, "node-a", true)
	tTaint := time.Now()
	moved := h.podReady("web-0", old.UID)
	if moved.Spec.NodeName != "node-b" {
		t.Fatalf("web-0 recreated on %s, want node-b", moved.Spec.NodeName)
	}
	h.waitAttached(pv.Name, "node-b")
	tMoved := time.Now()
	fenced := listFences(t, sockB)
	if !fenced[pv.Spec.CSI.VolumeHandle+" node-a"] {
		t.Errorf("after the force-detach: fences %v, want volume %s fenced off node-a", fenced, pv.Spec.CSI.VolumeHandle)
	}
	newFile := filepath.Join(env.KubeletDir(), "pods", string(moved.UID), "volumes", "kubernetes.io~csi", pv.Name, "mount", "stamps")
	kube.WaitFor(t, nodeWait, "3 stamps of the new web-0 on node-b", func(ctx context.Context) (bool, string, error) {
		b, err := os.ReadFile(newFile)
		return err == nil && len(stampsOf(string(b), string(moved.UID))) >= 3, fmt.Sprint(err), nil
	})
	b, err := os.ReadFile(newFile)
	if err != nil {
		t.Fatal(err)
	}
	onB := stampsOf(string(b), string(old.UID))
	checkPrefix(t, "node-a's stamps read on node-b", onB, last)
	t.Logf("node loss: node-a NotReady %s after the freeze; web-0 Ready on node-b, volume attached there, %s after the taint",
		tNotReady.Sub(tFreeze).Round(time.Millisecond), tMoved.Sub(tTaint).Round(time.Millisecond))

	// 4. node-a wakes up while web-0 writes on node-b: first its rbd-fuse
	// and the old writer alone (its kubelet, which would kill the writer
	// at once, still stopped), so that the writer does write on its
	// fenced mount; then the rest.
	writer := podProcesses(string(old.UID))
	if len(writer) == 0 {
		t.Fatalf("no process of the old web-0 (POD_UID=%s) on the host", old.UID)
	}
	for _, pid := range append(slices.Clone(fuseA), writer...) {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Second)
	attempted := -1 // unknown: the read did not answer
	if text, err := readBounded(oldFile, 10*time.Second); err == nil {
		attempted = 0
		for _, n := range stampsOf(text, string(old.UID)) {
			if n > last {
				attempted++
			}
		}
	} else {
		t.Logf("node-a's view of the file after its writer woke: %v", err)
	}
	thawed = true
	tThaw := time.Now()
	if err := thaw(); err != nil {
		t.Fatal(err)
	}
	env.WaitNodeCondition(t, nodeWait, "node-a", corev1.ConditionTrue)
	kube.WaitFor(t, nodeWait, "node-a's kubelet and node plugin cleaned up the old pod's volume", func(ctx context.Context) (bool, string, error) {
		podMounts := mountsBelow(filepath.Join(nodeA.KubeletDir, "pods", string(old.UID)))
		stageMounts := append(mountsBelow(filepath.Join(nodeA.KubeletDir, "plugins", "kubernetes.io", "csi")), mountsBelow(stateA)...)
		fuse, loops := fuseDaemons(stateA), loopsOf(stateA)
		return len(podMounts)+len(stageMounts)+len(fuse)+len(loops) == 0,
			fmt.Sprintf("mounts below the old pod %v, staging and rbd-fuse mounts %v, rbd-fuse %v, loop devices %v", podMounts, stageMounts, fuse, loops), nil
	})
	tClean := time.Now()

	// 5. The admin's steps: untaint, unfence.
	env.SetOutOfService(t, wait, "node-a", false)
	unfence(t, sockB, pv.Spec.CSI.VolumeHandle, "node-a")
	if f := listFences(t, sockB); len(f) != 0 {
		t.Errorf("after Unfence: fences %v, want none", f)
	}

	// 6. The pod goes; the image is checked offline.
	b, err = os.ReadFile(newFile)
	if err != nil {
		t.Fatal(err)
	}
	bStamps := stampsOf(string(b), string(moved.UID))
	if err := cl.AppsV1().StatefulSets(ns).Delete(h.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.deletePod("web-0")
	h.waitDetached(pv.Name)
	text := exportStamps(t, c, pool, image)
	final := stampsOf(text, string(old.UID))
	checkPrefix(t, "node-a's stamps in the image at the end", final, last)
	var late []int
	for _, n := range final {
		if n > last {
			late = append(late, n)
		}
	}
	if len(late) > 0 {
		t.Errorf("node-a's writes after the fence landed: stamps %v (the last before the freeze was %d)", late, last)
	}
	if got := stampsOf(text, string(moved.UID)); len(got) < len(bStamps) {
		t.Errorf("node-b's stamps in the image: %d, it had written %d", len(got), len(bStamps))
	}
	t.Logf("stamps of node-a: %d written by the freeze, %d on node-b after the move (%d lost: the last may not have been fsynced), "+
		"%d written on node-a's fenced mount after it woke (-1: unknown), %d of them landed; node-b wrote %d; "+
		"node-a cleaned up %s after the thaw; whole test %s",
		last, len(onB), last-len(onB), attempted, len(late), len(bStamps), tClean.Sub(tThaw).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// stampSet is the StatefulSet "web": one busybox pod, preferring node-a,
// that appends "<pod UID> <n>" to /data/stamps and fsyncs the file, five
// times a second, on a 64Mi RWO claim of deploy/'s class.
func stampSet() *appsv1.StatefulSet {
	grace := int64(1)
	labels := map[string]string{"app": "web"}
	script := `i=0; while true; do i=$((i+1)); echo "$POD_UID $i" >> /data/stamps; sync /data/stamps; sleep 0.2; done`
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(1)), ServiceName: "web",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{
						Name: "c", Image: kube.BusyboxImage, ImagePullPolicy: corev1.PullNever,
						Command: []string{"sh", "-c", script},
						Env: []corev1.EnvVar{{Name: "POD_UID", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
							Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
								Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-a"}}}},
						}}}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr.To(class),
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("64Mi")}},
				},
			}},
		},
	}
}

// podReady waits for pod name, other than UID not (empty: any), to be
// Ready, and returns it.
func (h *h) podReady(name string, not types.UID) *corev1.Pod {
	h.t.Helper()
	var pod *corev1.Pod
	kube.WaitFor(h.t, nodeWait, "pod "+name+" Ready", func(ctx context.Context) (bool, string, error) {
		p, err := h.env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if not != "" && p.UID == not {
			return false, fmt.Sprintf("still the old pod (deletion %v)", p.DeletionTimestamp), nil
		}
		pod = p
		for _, cd := range p.Status.Conditions {
			if cd.Type == corev1.PodReady && cd.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("on %q, phase %s, conditions %+v; events: %s", p.Spec.NodeName, p.Status.Phase,
			p.Status.Conditions, h.env.Events(ctx, ns, name)), nil
	})
	return pod
}

// attachments maps the nodes of the volume's VolumeAttachments to their
// attached status.
func (h *h) attachments(ctx context.Context, pv string) (map[string]bool, error) {
	vas, err := h.env.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, va := range vas.Items {
		if p := va.Spec.Source.PersistentVolumeName; p != nil && *p == pv {
			out[va.Spec.NodeName] = va.Status.Attached
		}
	}
	return out, nil
}

func (h *h) waitAttached(pv, node string) {
	h.t.Helper()
	kube.WaitFor(h.t, nodeWait, "volume "+pv+" attached to "+node+" only", func(ctx context.Context) (bool, string, error) {
		m, err := h.attachments(ctx, pv)
		return err == nil && len(m) == 1 && m[node], fmt.Sprintf("attachments %v %v", m, err), nil
	})
}

func (h *h) waitDetached(pv string) {
	h.t.Helper()
	kube.WaitFor(h.t, nodeWait, "volume "+pv+" detached", func(ctx context.Context) (bool, string, error) {
		m, err := h.attachments(ctx, pv)
		return err == nil && len(m) == 0, fmt.Sprintf("attachments %v %v", m, err), nil
	})
}

// deletePod deletes pod name (its StatefulSet deleted first: no garbage
// collector runs) and waits until it is gone, its volumes unpublished and
// unstaged by its kubelet.
func (h *h) deletePod(name string) {
	h.t.Helper()
	if err := h.env.Client.CoreV1().Pods(ns).Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatalf("delete pod %s: %v", name, err)
	}
	kube.WaitFor(h.t, nodeWait, "pod "+name+" gone", func(ctx context.Context) (bool, string, error) {
		p, err := h.env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return true, "", nil
		}
		return false, fmt.Sprintf("on %s, deletion %v", p.Spec.NodeName, p.DeletionTimestamp), nil
	})
}

// listFences returns the driver's fences ("<volume> <node>") from the
// Fencing service on its endpoint (what `csikit fences` prints).
func listFences(t *testing.T, sock string) map[string]bool {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	list := new(structpb.Struct)
	if err := conn.Invoke(ctx, "/"+csikit.FencingService+"/List", &emptypb.Empty{}, list); err != nil {
		t.Fatalf("%s/List: %v", csikit.FencingService, err)
	}
	out := map[string]bool{}
	for _, v := range list.GetFields()["fenced"].GetListValue().GetValues() {
		f := v.GetStructValue().GetFields()
		out[f["volume_id"].GetStringValue()+" "+f["node_id"].GetStringValue()] = true
	}
	return out
}

// unfence lifts the fence of node off volume (`csikit unfence`).
func unfence(t *testing.T, sock, volume, node string) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	req, err := structpb.NewStruct(map[string]any{"volume_id": volume, "node_id": node})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Invoke(ctx, "/"+csikit.FencingService+"/Unfence", req, &emptypb.Empty{}); err != nil {
		t.Fatalf("%s/Unfence %s %s: %v", csikit.FencingService, volume, node, err)
	}
}

// exportStamps exports pool/image (rbd export as client.admin), checks its
// file system (e2fsck -fn) and returns its /stamps (debugfs: no mount).
func exportStamps(t *testing.T, c cephtest.Cluster, pool, image string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), image)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "rbd", "-c", c.Conf, "-n", "client.admin", "-k", c.AdminKeyring,
		"export", pool+"/"+image, file).CombinedOutput(); err != nil {
		t.Fatalf("rbd export %s: %v: %s", image, err, out)
	}
	if err := sanity.CheckFilesystem(ctx, file); err != nil {
		t.Errorf("the image after the node loss: %v", err)
	}
	out, err := exec.CommandContext(ctx, "debugfs", "-R", "cat /stamps", file).Output()
	if err != nil {
		t.Fatalf("debugfs cat /stamps: %v", err)
	}
	return string(out)
}

// checkPrefix fails unless stamps are 1, 2, … in order, ending at last or
// last-1 (the last stamp may not have been fsynced when its writer was
// stopped; every earlier one was).
func checkPrefix(t *testing.T, what string, stamps []int, last int) {
	t.Helper()
	for i, n := range stamps {
		if n != i+1 {
			t.Errorf("%s: #%d is %d, want %d (%v)", what, i+1, n, i+1, stamps)
			return
		}
	}
	if len(stamps) < last-1 {
		t.Errorf("%s: %d stamps, want %d or %d: fsynced stamps lost", what, len(stamps), last-1, last)
	}
}

// stampsOf returns the numbers of the lines "<uid> <n>" of uid, in file
// order.
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

// readBounded reads file, giving up after d (a read that waits on a
// stopped FUSE daemon would never return; its goroutine then stays
// blocked until the daemon runs again).
func readBounded(file string, d time.Duration) (string, error) {
	done := make(chan struct{})
	var b []byte
	var err error
	go func() {
		b, err = os.ReadFile(file)
		close(done)
	}()
	select {
	case <-done:
		return string(b), err
	case <-time.After(d):
		return "", fmt.Errorf("read %s: no answer within %s", file, d)
	}
}

// fuseDaemons returns the PIDs of the rbd-fuse processes whose command
// line names dir (a node's state directory): that node's mappings only.
func fuseDaemons(dir string) []int {
	return hostPIDs(func(proc string) bool {
		comm, err := os.ReadFile(filepath.Join(proc, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "rbd-fuse" {
			return false
		}
		cmd, _ := os.ReadFile(filepath.Join(proc, "cmdline"))
		return strings.Contains(string(cmd), dir+"/")
	})
}

// podProcesses returns the PIDs of the host's processes whose environment
// holds POD_UID=uid: the stamp writer of that pod and its children.
func podProcesses(uid string) []int {
	return hostPIDs(func(proc string) bool {
		env, err := os.ReadFile(filepath.Join(proc, "environ"))
		return err == nil && slices.Contains(strings.Split(string(env), "\x00"), "POD_UID="+uid)
	})
}

// hostPIDs returns the PIDs of the host's processes that match, given
// the process's /proc/<pid> directory.
func hostPIDs(match func(proc string) bool) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		if !match(p) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(p)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// loopsOf lists the loop devices whose backing file is below dir.
func loopsOf(dir string) []string {
	var out []string
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), dir+"/") {
			out = append(out, strings.Split(f, "/")[3])
		}
	}
	return out
}

// mountsBelow lists the mount points at or below dir.
func mountsBelow(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

package kube_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/csikit/csikit/sanity/kube"
)

// kubeletWait bounds a pod's progress: generous, as the machine running
// CI is shared, yet bounded so a stuck pod fails with its events.
const kubeletWait = 3 * time.Minute

// prereqSkip skips for a missing prerequisite, or fails under
// CSIKIT_STRICT_TESTS=1 (CI, where every prerequisite is installed). This
// module cannot use the SDK's internal/testenv, so it reads the variable.
func prereqSkip(t *testing.T, why any) {
	t.Helper()
	if os.Getenv("CSIKIT_STRICT_TESTS") == "1" {
		t.Fatalf("prerequisite missing under CSIKIT_STRICT_TESTS=1: %v", why)
	}
	t.Skip(why)
}

// kenv is the kubelet-mode environment with examples/hostpath running as
// a binary (its node plugin registered with kubelet by itself).
type kenv struct {
	env    *kube.Env
	driver *kube.Process
	state  string
}

// kubeletPrereqs skips unless the kubelet mode is asked for and can run.
func kubeletPrereqs(t *testing.T) {
	t.Helper()
	if os.Getenv("CSIKIT_KUBE_KUBELET") == "" {
		t.Skip("the kubelet mode is opt-in: set CSIKIT_KUBE_KUBELET=1 (root, runc, containernetworking-plugins, busybox-static; ci.sh does)")
	}
	startPrereqs(t)
	if err := kube.NodePrereqs(kube.KubeletOptions{}); err != nil {
		prereqSkip(t, err)
	}
}

// startKubelet builds examples/hostpath, starts the environment in the
// kubelet mode, and starts the driver registering itself with kubelet.
func startKubelet(t *testing.T) *kenv {
	t.Helper()
	kubeletPrereqs(t)
	dir, bin := buildHostpath(t)
	sock := filepath.Join(dir, "csi.sock")
	env := kube.Start(t, kube.Options{
		Endpoint: "unix://" + sock, DriverName: hostpathName, NodeName: "node-1",
		// csi-attacher: deploy/csidriver.yaml has attachRequired (the
		// driver runs with --enable-attach, as in deploy/node.yaml).
		Sidecars: []string{"csi-provisioner", "csi-attacher", "csi-resizer"},
		Kubelet:  &kube.KubeletOptions{CheckLeftovers: true},
	})
	for _, m := range []string{"rbac.yaml", "csidriver.yaml", "storageclass.yaml", "volumesnapshotclass.yaml"} {
		env.ApplyFile(t, hostpathDeploy(m))
	}
	createNamespace(t, env)
	state := filepath.Join(dir, "state")
	p, err := kube.StartProcess(kube.ProcessOptions{
		Name: "hostpath", Path: bin, LogDir: env.Dir, Restart: true,
		Args: []string{
			"--endpoint=unix://" + sock, "--nodeid=node-1", "--state-dir=" + state, "--enable-attach",
			"--kubelet-registration-path=" + sock,
			"--kubelet-registration-dir=" + env.RegistrationDir(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	k := &kenv{env: env, driver: p, state: state}
	stopAtCleanup(t, p)
	// Runs before the driver stops: pods' volumes are unpublished and the
	// volumes deleted through the driver.
	t.Cleanup(func() { k.teardown(t) })
	waitDriverOnNode(t, env)
	return k
}

// stopAtCleanup stops p when t ends and, if t failed, logs the tail of
// its log.
func stopAtCleanup(t *testing.T, p *kube.Process) {
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

// shortTempDir is a new temporary directory with a short path (unix
// socket paths are limited to 108 bytes; t.TempDir's holds the test's
// name), removed at cleanup.
func shortTempDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	return dir
}

// buildHostpath builds examples/hostpath into a new short temporary
// directory (unix socket paths are limited: the test's sockets go there
// too), removed at cleanup, and returns both.
func buildHostpath(t *testing.T) (dir, bin string) {
	t.Helper()
	dir = shortTempDir(t, "csikit-hp-")
	bin = filepath.Join(dir, "hostpath")
	build := exec.Command("go", "build", "-o", bin, "./examples/hostpath")
	build.Dir = filepath.Join("..", "..") // the SDK's module: its go.sum
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build examples/hostpath: %v: %s", err, out)
	}
	return dir, bin
}

// waitDriverOnNode waits until node-1's CSINode lists the hostpath driver
// (kubelet registered it), and checks its node ID is node-1.
func waitDriverOnNode(t *testing.T, env *kube.Env) {
	t.Helper()
	if d := env.WaitDriverRegistered(t, kubeletWait, "node-1", hostpathName); d.NodeID != "node-1" {
		t.Fatalf("the driver registered on node-1 with node ID %q", d.NodeID)
	}
}

// teardown deletes every pod, then every PVC, and waits for the PVs to be
// deleted by the driver, so that nothing stays mounted or attached.
func (k *kenv) teardown(t *testing.T) {
	if err := k.env.DeleteClaims(context.Background(), kubeletWait, ns); err != nil {
		t.Errorf("teardown: %v", err)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// hostpathDeploy is the path of examples/hostpath/deploy/<name>.
func hostpathDeploy(name string) string {
	return filepath.Join("..", "..", "examples", "hostpath", "deploy", name)
}

// podSpec is a busybox pod running script with sh; restartPolicy Never,
// so a script that ends leaves the pod Succeeded or Failed, with what it
// wrote to /dev/termination-log as the termination message.
func (h *h) podSpec(name, script string, vols ...corev1.Volume) *corev1.Pod {
	grace := int64(1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "c", Image: kube.BusyboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", script},
			}},
			Volumes: vols,
		},
	}
	for _, v := range vols {
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: v.Name, MountPath: "/" + v.Name})
	}
	return p
}

func pvcVolume(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func (h *h) createPod(p *corev1.Pod) *corev1.Pod {
	h.t.Helper()
	p, err := h.env.Client.CoreV1().Pods(ns).Create(h.ctx, p, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("create pod %s: %v", p.Name, err)
	}
	return p
}

// podState describes a pod for failure messages: phase, conditions,
// container states and events.
func (h *h) podState(ctx context.Context, p *corev1.Pod) string {
	var cs []string
	for _, c := range p.Status.Conditions {
		cs = append(cs, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Message))
	}
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil:
			cs = append(cs, "waiting: "+s.State.Waiting.Reason+" "+s.State.Waiting.Message)
		case s.State.Terminated != nil:
			cs = append(cs, fmt.Sprintf("terminated: %d %s", s.State.Terminated.ExitCode, s.State.Terminated.Message))
		}
	}
	return fmt.Sprintf("phase %s %v; events: %s", p.Status.Phase, cs, h.events(ctx, p.Name))
}

// succeeded waits for the pod to end Succeeded and returns its
// termination message; a Failed pod fails the test at once.
func (h *h) succeeded(name string) string {
	h.t.Helper()
	var msg string
	kube.WaitFor(h.t, kubeletWait, "pod "+name+" Succeeded", func(ctx context.Context) (bool, string, error) {
		p, err := h.env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Status.Phase == corev1.PodFailed {
			h.t.Fatalf("pod %s failed: %s", name, h.podState(ctx, p))
		}
		if p.Status.Phase != corev1.PodSucceeded {
			return false, h.podState(ctx, p), nil
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Terminated != nil {
				msg = s.State.Terminated.Message
			}
		}
		return true, "", nil
	})
	return msg
}

// ready waits for the pod's Ready condition.
func (h *h) ready(name string) *corev1.Pod {
	h.t.Helper()
	var pod *corev1.Pod
	kube.WaitFor(h.t, kubeletWait, "pod "+name+" Ready", func(ctx context.Context) (bool, string, error) {
		p, err := h.env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			h.t.Fatalf("pod %s ended: %s", name, h.podState(ctx, p))
		}
		pod = p
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, h.podState(ctx, p), nil
	})
	return pod
}

// deletePod deletes the pod and waits until kubelet has torn it down (its
// volumes unpublished) and the API object is gone.
func (h *h) deletePod(name string) {
	h.t.Helper()
	if err := h.env.Client.CoreV1().Pods(ns).Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatalf("delete pod %s: %v", name, err)
	}
	kube.WaitFor(h.t, kubeletWait, "pod "+name+" gone", func(ctx context.Context) (bool, string, error) {
		p, err := h.env.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return true, "", nil // NotFound
		}
		return false, h.podState(ctx, p), nil
	})
}

// podMounts returns the mount points below the pod's directory of kubelet.
func (h *h) podMounts(uid string) []string {
	h.t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		h.t.Fatal(err)
	}
	dir := filepath.Join(h.env.KubeletDir(), "pods", uid) + "/"
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], dir) {
			out = append(out, f[4])
		}
	}
	return out
}

// noPodMounts waits until no mount of the pod remains below kubelet's
// pods directory: kubelet may finish TearDown just after the API object
// is gone.
func (h *h) noPodMounts(uid string) {
	h.t.Helper()
	kube.WaitFor(h.t, time.Minute, "the deleted pod's mounts removed", func(ctx context.Context) (bool, string, error) {
		m := h.podMounts(uid)
		return len(m) == 0, fmt.Sprintf("mounted: %v", m), nil
	})
}

// TestKubelet runs examples/hostpath under a real kubelet, scheduler and
// container runtime: real pods mount its volumes and read and write data.
func TestKubelet(t *testing.T) {
	k := startKubelet(t)
	newH := func(t *testing.T) *h {
		return &h{t: t, env: k.env, ctx: context.Background()}
	}
	wffc := func(sc *storagev1.StorageClass) {
		m := storagev1.VolumeBindingWaitForFirstConsumer
		sc.VolumeBindingMode = &m
	}

	t.Run("registered-without-node-driver-registrar", func(t *testing.T) {
		h := newH(t)
		if _, err := os.Stat(filepath.Join(k.env.RegistrationDir(), hostpathName+"-reg.sock")); err != nil {
			t.Errorf("the driver's registration socket: %v", err)
		}
		n, err := h.env.Client.CoreV1().Nodes().Get(h.ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Annotations["csi.volume.kubernetes.io/nodeid"]; !strings.Contains(got, `"`+hostpathName+`":"node-1"`) {
			t.Errorf("Node annotation csi.volume.kubernetes.io/nodeid = %q, want the driver's node ID", got)
		}
		if got := n.Labels["topology.hostpath.csikit.dev/node"]; got != "node-1" {
			t.Errorf("Node topology label = %q, want node-1 (from NodeGetInfo)", got)
		}
	})

	t.Run("pvc-immediate-rwo-data-survives-pod", func(t *testing.T) {
		h := newH(t)
		h.storageClass("kl-immediate", nil)
		h.pvc("kl-rwo", "kl-immediate", "64Mi", nil)
		h.bound("kl-rwo")
		w := h.createPod(h.podSpec("kl-writer", "echo written-by-kl-writer > /data/f && sync && cat /data/f > /dev/termination-log", pvcVolume("data", "kl-rwo")))
		if got := h.succeeded("kl-writer"); got != "written-by-kl-writer\n" {
			t.Fatalf("writer read back %q", got)
		}
		h.deletePod("kl-writer")
		h.noPodMounts(string(w.UID))
		h.createPod(h.podSpec("kl-reader", "cat /data/f > /dev/termination-log", pvcVolume("data", "kl-rwo")))
		if got := h.succeeded("kl-reader"); got != "written-by-kl-writer\n" {
			t.Fatalf("a new pod read %q, want what the deleted pod wrote", got)
		}
		h.deletePod("kl-reader")
	})

	t.Run("deploy-storageclasses", func(t *testing.T) {
		// examples/hostpath/deploy/storageclass.yaml as applied above:
		// WaitForFirstConsumer directory and xfs volumes.
		h := newH(t)
		h.pvc("kl-deploy-dir", "csikit-hostpath", "64Mi", nil)
		h.pvc("kl-deploy-xfs", "csikit-hostpath-xfs", "320Mi", nil)
		h.createPod(h.podSpec("kl-deploy", "echo d > /dir/f && echo x > /xfs/f && cat /dir/f /xfs/f > /dev/termination-log && "+
			"stat -f -c %T /xfs >> /dev/termination-log", pvcVolume("dir", "kl-deploy-dir"), pvcVolume("xfs", "kl-deploy-xfs")))
		if got := h.succeeded("kl-deploy"); got != "d\nx\nxfs\n" {
			t.Fatalf("pod on the deploy StorageClasses: %q, want both volumes written and an xfs filesystem", got)
		}
		h.deletePod("kl-deploy")
	})

	t.Run("pvc-wffc-rwop", func(t *testing.T) {
		h := newH(t)
		h.storageClass("kl-wffc", wffc)
		h.pvc("kl-rwop", "kl-wffc", "64Mi", func(c *corev1.PersistentVolumeClaim) {
			c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
		})
		// No consumer yet: WaitForFirstConsumer keeps it Pending.
		time.Sleep(2 * time.Second)
		if c, err := h.env.Client.CoreV1().PersistentVolumeClaims(ns).Get(h.ctx, "kl-rwop", metav1.GetOptions{}); err != nil || c.Status.Phase != corev1.ClaimPending {
			t.Fatalf("PVC before a consumer: %v %v, want Pending", c.Status.Phase, err)
		}
		// The scheduler picks the node, the provisioner creates the volume
		// there, kubelet stages and publishes it.
		hold := "echo rwop-data > /data/f && sync && touch /tmp/ok && while true; do sleep 1; done"
		p := h.podSpec("kl-rwop-1", hold, pvcVolume("data", "kl-rwop"))
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ok"}}}}
		h.createPod(p)
		h.ready("kl-rwop-1")
		_, pv := h.bound("kl-rwop")
		if pv.Spec.NodeAffinity == nil {
			t.Errorf("PV %s has no node affinity: WaitForFirstConsumer did not pass the node's topology", pv.Name)
		}
		// A second pod on the same ReadWriteOncePod claim is refused by the
		// scheduler while the first runs.
		h.createPod(h.podSpec("kl-rwop-2", "cat /data/f > /dev/termination-log", pvcVolume("data", "kl-rwop")))
		kube.WaitFor(t, kubeletWait, "kl-rwop-2 unschedulable", func(ctx context.Context) (bool, string, error) {
			p, err := h.env.Client.CoreV1().Pods(ns).Get(ctx, "kl-rwop-2", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if p.Spec.NodeName != "" {
				t.Fatalf("a second pod on a ReadWriteOncePod claim was scheduled: %s", h.podState(ctx, p))
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					return true, "", nil
				}
			}
			return false, h.podState(ctx, p), nil
		})
		h.deletePod("kl-rwop-1")
		if got := h.succeeded("kl-rwop-2"); got != "rwop-data\n" {
			t.Fatalf("second pod read %q after the first was deleted", got)
		}
		h.deletePod("kl-rwop-2")
	})

	t.Run("block-volume", func(t *testing.T) {
		h := newH(t)
		h.storageClass("kl-block", nil)
		h.pvc("kl-block", "kl-block", "16Mi", func(c *corev1.PersistentVolumeClaim) {
			m := corev1.PersistentVolumeBlock
			c.Spec.VolumeMode = &m
		})
		h.bound("kl-block")
		blockPod := func(name, script string) {
			p := h.podSpec(name, script)
			p.Spec.Volumes = []corev1.Volume{pvcVolume("blk", "kl-block")}
			p.Spec.Containers[0].VolumeDevices = []corev1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}
			h.createPod(p)
		}
		blockPod("kl-block-w", "test -b /dev/xvda && echo block-bytes | dd of=/dev/xvda bs=512 count=1 conv=sync,fsync 2>/dev/null && "+
			"blockdev --getsize64 /dev/xvda > /dev/termination-log")
		if got := h.succeeded("kl-block-w"); got != "16777216\n" {
			t.Fatalf("block device size in the pod: %q, want 16777216", got)
		}
		h.deletePod("kl-block-w")
		blockPod("kl-block-r", "dd if=/dev/xvda bs=12 count=1 2>/dev/null > /dev/termination-log")
		if got := h.succeeded("kl-block-r"); got != "block-bytes\n" {
			t.Fatalf("a new pod read %q from the block device", got)
		}
		h.deletePod("kl-block-r")
	})

	t.Run("inline-ephemeral", func(t *testing.T) {
		h := newH(t)
		p := h.podSpec("kl-inline", "echo inline > /scratch/f && cat /scratch/f > /dev/termination-log && "+
			"grep -q ' /scratch ' /proc/mounts")
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{
			CSI: &corev1.CSIVolumeSource{Driver: hostpathName}}}}
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
		p = h.createPod(p)
		if got := h.succeeded("kl-inline"); got != "inline\n" {
			t.Fatalf("inline volume: read %q", got)
		}
		h.deletePod("kl-inline")
		h.noPodMounts(string(p.UID))
	})

	fsClass := func(sc *storagev1.StorageClass) {
		// external-provisioner reads the (deprecated) fsType key too, so the
		// PV gets spec.csi.fsType and kubelet applies fsGroup.
		sc.Parameters["fsType"] = "ext4"
		yes := true
		sc.AllowVolumeExpansion = &yes
	}

	t.Run("fsgroup", func(t *testing.T) {
		h := newH(t)
		h.storageClass("kl-ext4", fsClass)
		h.pvc("kl-fsgroup", "kl-ext4", "32Mi", nil)
		h.bound("kl-fsgroup")
		p := h.podSpec("kl-fsgroup", "touch /data/f && stat -c %g /data /data/f > /dev/termination-log", pvcVolume("data", "kl-fsgroup"))
		uid, gid := int64(1000), int64(2345)
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid, FSGroup: &gid}
		h.createPod(p)
		if got := h.succeeded("kl-fsgroup"); got != "2345\n2345\n" {
			t.Fatalf("group of the volume root and of a new file: %q, want fsGroup 2345 on both", got)
		}
		h.deletePod("kl-fsgroup")
	})

	t.Run("expansion-seen-in-pod", func(t *testing.T) {
		h := newH(t)
		// xfs: online ext4 growth (resize2fs) is refused with "Permission
		// denied to resize filesystem" in some sandboxes (CI's among them),
		// while xfs_growfs works there.
		h.storageClass("kl-expand", func(sc *storagev1.StorageClass) {
			sc.Parameters["fsType"] = "xfs"
			yes := true
			sc.AllowVolumeExpansion = &yes
		})
		h.pvc("kl-expand", "kl-expand", "320Mi", nil)
		h.bound("kl-expand")
		// Ready only once the filesystem the pod sees holds > 300000 KiB
		// (320 MiB of xfs: 262144 KiB; 400 MiB: 344064 KiB).
		p := h.podSpec("kl-expand", "while true; do sleep 1; done", pvcVolume("data", "kl-expand"))
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
			Command: []string{"sh", "-c", "test $(df -k /data | awk 'NR==2{print $2}') -gt 300000"}}}}
		h.createPod(p)
		kube.WaitFor(t, kubeletWait, "kl-expand running, not ready", func(ctx context.Context) (bool, string, error) {
			p, err := h.env.Client.CoreV1().Pods(ns).Get(ctx, "kl-expand", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			running := len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
			return running && !p.Status.ContainerStatuses[0].Ready, h.podState(ctx, p), nil
		})
		time.Sleep(3 * time.Second) // several probes see the small filesystem
		if p := h.get("kl-expand"); p.Status.ContainerStatuses[0].Ready {
			t.Fatal("the probe passed before the expansion: it cannot detect one")
		}
		h.patchPVCSize("kl-expand", "400Mi")
		h.ready("kl-expand")
		kube.WaitFor(t, kubeletWait, "PVC capacity 400Mi", func(ctx context.Context) (bool, string, error) {
			c, err := h.env.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "kl-expand", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			q := c.Status.Capacity[corev1.ResourceStorage]
			return q.Cmp(resource.MustParse("400Mi")) >= 0, fmt.Sprintf("capacity %s, conditions %v", q.String(), c.Status.Conditions), nil
		})
		h.deletePod("kl-expand")
	})

	t.Run("driver-restart-while-pods-run", func(t *testing.T) {
		h := newH(t)
		h.storageClass("kl-restart", nil)
		h.pvc("kl-restart", "kl-restart", "64Mi", nil)
		h.bound("kl-restart")
		h.writerSurvives("kl", "kl-restart", "the driver restart", "", "", func() {
			starts := k.driver.Starts()
			if err := k.driver.Kill(); err != nil {
				t.Fatal(err)
			}
			kube.WaitFor(t, kubeletWait, "the driver restarted", func(ctx context.Context) (bool, string, error) {
				return k.driver.Starts() > starts && k.driver.Running(), "", nil
			})
		})
	})
}

// writerSurvives runs disrupt (what, in failures) while pod <prefix>-stamp
// writes a counter to /data/stamp of claim every 200 ms (atomically, by
// rename), then checks that
// the pod's mounts are the same, that a new pod <prefix>-watch on the claim
// (published after the disruption) sees the counter move and then prints
// what the shell commands extra print, which must be extraOut, and that
// the writer never restarted. It deletes both pods and returns the
// writer's UID.
func (h *h) writerSurvives(prefix, claim, what, extra, extraOut string, disrupt func()) string {
	h.t.Helper()
	// Each count is written to a new file renamed over the old one: a
	// reader sees the last count or the next, never the empty file that
	// `echo > /data/stamp` leaves between its truncate and its write (a
	// watch pod once read "" there and reported the writer stuck).
	w := h.podSpec(prefix+"-stamp", "i=0; while true; do i=$((i+1)); echo $i > /data/stamp.new; mv /data/stamp.new /data/stamp; touch /tmp/ok; sleep 0.2; done", pvcVolume("data", claim))
	w.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/ok"}}}}
	h.createPod(w)
	w = h.ready(prefix + "-stamp")
	before := h.podMounts(string(w.UID))
	if len(before) == 0 {
		h.t.Fatal("the running pod has no volume mount below kubelet's pods directory")
	}
	disrupt()
	if after := h.podMounts(string(w.UID)); strings.Join(after, ",") != strings.Join(before, ",") {
		h.t.Errorf("the running pod's mounts changed across %s: %v -> %v", what, before, after)
	}
	h.createPod(h.podSpec(prefix+"-watch", "{ a=$(cat /data/stamp); sleep 2; b=$(cat /data/stamp); "+
		"if [ \"$b\" -gt \"$a\" ]; then echo moving; else echo stuck $a $b; fi; "+extra+" } > /dev/termination-log", pvcVolume("data", claim)))
	if got, want := h.succeeded(prefix+"-watch"), "moving\n"+extraOut; got != want {
		h.t.Fatalf("a new pod after %s: %q, want %q (the running pod still writing)", what, got, want)
	}
	if p := h.get(prefix + "-stamp"); p.Status.ContainerStatuses[0].RestartCount != 0 || p.Status.ContainerStatuses[0].State.Running == nil {
		h.t.Errorf("the writer pod did not survive %s: %s", what, h.podState(h.ctx, p))
	}
	h.deletePod(prefix + "-watch")
	h.deletePod(prefix + "-stamp")
	return string(w.UID)
}

func (h *h) get(name string) *corev1.Pod {
	h.t.Helper()
	p, err := h.env.Client.CoreV1().Pods(ns).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

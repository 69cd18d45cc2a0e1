package kube_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/csikit/csikit/sanity/kube"
)

// hostpathImage is the image the test builds for examples/hostpath (the
// manifests name csikit/hostpath:latest, which kubelet would try to pull).
const hostpathImage = "csikit.local/hostpath:test"

// deployNS is the namespace of examples/hostpath/deploy.
const deployNS = "csikit-hostpath"

// deployImages builds the images deploy/node.yaml and deploy/controller.yaml
// run, as tarballs in dir: examples/hostpath (static, CGO_ENABLED=0) with a
// static busybox for a shell and mount(8) and hostpathTools, and each
// sidecar of the tool block under the very reference controller.yaml
// names (kube.SidecarImages checks the reference's tag is the version the
// tool block builds).
func deployImages(t *testing.T, dir, binDir string) []string {
	t.Helper()
	ctx := context.Background()
	bin := filepath.Join(dir, "hostpath")
	if err := kube.BuildStatic(ctx, filepath.Join("..", ".."), "./examples/hostpath", bin); err != nil {
		t.Fatal(err)
	}
	tar := filepath.Join(dir, "hostpath.tar")
	if err := kube.WriteDriverImage(ctx, tar, kube.DriverImage{Ref: hostpathImage, Driver: bin, Tools: hostpathTools,
		Files: []kube.ImageFile{{Path: "/etc/mke2fs.conf", Source: "/etc/mke2fs.conf", Mode: 0o644}}}); err != nil {
		t.Fatalf("the hostpath image (Debian's e2fsprogs, xfsprogs, util-linux, mount): %v", err)
	}
	ctrl, err := os.ReadFile(hostpathDeploy("controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sidecars, err := kube.SidecarImages(dir, binDir, ctrl)
	if err != nil {
		t.Fatal(err)
	}
	if len(sidecars) != 4 {
		t.Fatalf("controller.yaml: sidecar images %v, want provisioner, attacher, resizer and snapshotter", sidecars)
	}
	return append([]string{tar}, sidecars...)
}

// applyHostpathDeploy applies examples/hostpath/deploy to node-1 of the
// kubelet mode: the manifests named, then node.yaml and controller.yaml
// with the test's image, the kubelet's root directory and a state
// directory below the environment's (hostpathState), after labelling
// node-1 for controller.yaml's nodeSelector.
func applyHostpathDeploy(t *testing.T, env *kube.Env, manifests ...string) {
	t.Helper()
	if _, err := env.Client.CoreV1().Nodes().Patch(context.Background(), "node-1", "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"csikit-hostpath":"controller"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range manifests {
		env.ApplyFile(t, hostpathDeploy(m))
	}
	applyHostpathDriver(t, env)
}

// applyHostpathDriver applies node.yaml and controller.yaml of
// examples/hostpath/deploy with the test's image, the kubelet's root
// directory and the state directory hostpathState.
func applyHostpathDriver(t *testing.T, env *kube.Env) {
	t.Helper()
	root := env.KubeletDir()
	env.ApplyFile(t, hostpathDeploy("node.yaml"),
		"csikit/hostpath:latest", hostpathImage,
		"/var/lib/kubelet", root,
		"{path: /var/lib/csikit-hostpath, type: DirectoryOrCreate}", "{path: "+hostpathState(env)+", type: DirectoryOrCreate}")
	env.ApplyFile(t, hostpathDeploy("controller.yaml"), "/var/lib/kubelet", root)
}

// hostpathState is the deployed node plugin's state directory.
func hostpathState(env *kube.Env) string { return filepath.Join(env.Dir, "hostpath-state") }

// hostpathTools are the host programs the hostpath image carries, as
// examples/hostpath/Dockerfile installs them (Debian's e2fsprogs,
// xfsprogs, util-linux, mount): the filesystem kinds format, check, grow
// and probe with them.
var hostpathTools = []string{
	"/usr/sbin/mkfs.ext4", "/usr/sbin/mke2fs", "/usr/sbin/e2fsck", "/usr/sbin/fsck.ext4", "/usr/sbin/resize2fs",
	"/usr/sbin/mkfs.xfs", "/usr/sbin/xfs_growfs", "/usr/sbin/xfs_repair", "/usr/sbin/fsck.xfs",
	"/usr/sbin/fsck", "/usr/sbin/blkid", "/usr/sbin/losetup", "/usr/bin/mount", "/usr/bin/umount",
}

// TestKubeletDeploy applies examples/hostpath/deploy — what vendors copy —
// to the kubelet mode's node: every manifest, node.yaml and
// controller.yaml included, with only the image and host paths
// substituted (the node's kubelet has a non-default --root-dir, and the
// driver's state goes below the environment's directory). No harness
// sidecar runs and no driver process is started by the test: the
// DaemonSet's driver registers itself with kubelet, the Deployment's
// sidecars reach the API server with their service-account tokens through
// the kubernetes Service, with the RBAC of rbac.yaml.
func TestKubeletDeploy(t *testing.T) {
	start := time.Now()
	kubeletPrereqs(t)
	binDir, err := kube.EnsureBinaries(context.Background(), kube.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := shortTempDir(t, "csikit-deploy-")
	images := deployImages(t, dir, binDir)
	t.Logf("images built in %s", time.Since(start).Round(time.Millisecond))
	env := kube.Start(t, kube.Options{
		DriverName: hostpathName, NodeName: "node-1", BinDir: binDir,
		Sidecars: []string{}, // the Deployment's sidecars only
		Kubelet:  &kube.KubeletOptions{Images: images, CheckLeftovers: true},
	})
	applyHostpathDeploy(t, env, "rbac.yaml", "csidriver.yaml", "storageclass.yaml", "volumesnapshotclass.yaml")
	createNamespace(t, env)
	// Before the environment's Cleanup (which deletes the DaemonSet and
	// the Deployment): consumers go first, then the volumes, through the
	// deployed driver.
	t.Cleanup(func() {
		deployTeardown(t, env)
		if t.Failed() {
			env.LogPods(t, deployNS, 30)
		}
	})
	t.Logf("manifests applied %s after the start", time.Since(start).Round(time.Millisecond))

	t.Run("node-plugin-registers-itself", func(t *testing.T) {
		h := &h{t: t, env: env, ctx: context.Background()}
		t0 := time.Now()
		kube.WaitFor(t, kubeletWait, "the DaemonSet's pod Ready (its /healthz)", func(ctx context.Context) (bool, string, error) {
			return env.PodsReady(ctx, deployNS, "app=csikit-hostpath-node", 1, 1)
		})
		waitDriverOnNode(t, env)
		if _, err := os.Stat(filepath.Join(env.RegistrationDir(), hostpathName+"-reg.sock")); err != nil {
			t.Errorf("the driver's own registration socket: %v", err)
		}
		n, err := h.env.Client.CoreV1().Nodes().Get(h.ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := n.Labels["topology.hostpath.csikit.dev/node"]; got != "node-1" {
			t.Errorf("Node topology label = %q, want node-1 (from the DaemonSet driver's NodeGetInfo)", got)
		}
		t.Logf("node plugin ready and registered in %s", time.Since(t0).Round(time.Millisecond))
	})

	provisioned := false
	t.Run("controller-sidecars-provision-attach-publish", func(t *testing.T) {
		h := &h{t: t, env: env, ctx: context.Background()}
		t0 := time.Now()
		kube.WaitFor(t, kubeletWait, "the Deployment's pod Ready", func(ctx context.Context) (bool, string, error) {
			return env.PodsReady(ctx, deployNS, "app=csikit-hostpath-controller", 1, 4)
		})
		t.Logf("controller pod ready in %s", time.Since(t0).Round(time.Millisecond))
		// node.yaml keeps the API token out of the privileged pod, while
		// controller.yaml's pod gets one (the sidecars' in-cluster client).
		pods, err := env.Client.CoreV1().Pods(deployNS).List(h.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 2 {
			t.Errorf("%d pods in %s, want the node plugin and the controller", len(pods.Items), deployNS)
		}
		for _, p := range pods.Items {
			tokens := 0
			for _, v := range p.Spec.Volumes {
				if v.Projected != nil {
					for _, src := range v.Projected.Sources {
						if src.ServiceAccountToken != nil {
							tokens++
						}
					}
				}
			}
			node := p.Labels["app"] == "csikit-hostpath-node"
			if node && tokens != 0 || !node && tokens != 1 {
				t.Errorf("pod %s (app %s) has %d service account token volumes", p.Name, p.Labels["app"], tokens)
			}
		}
		// storageclass.yaml's default class: WaitForFirstConsumer directory
		// volumes. The scheduler picks the node, the Deployment's
		// provisioner creates the volume through the DaemonSet's driver,
		// its attacher attaches it, kubelet stages and publishes it
		// through the same driver.
		h.pvc("dep-data", "csikit-hostpath", "64Mi", nil)
		w := h.createPod(h.podSpec("dep-writer", "echo written-through-deploy > /data/f && sync && cat /data/f > /dev/termination-log", pvcVolume("data", "dep-data")))
		if got := h.succeeded("dep-writer"); got != "written-through-deploy\n" {
			t.Fatalf("writer read back %q", got)
		}
		_, pv := h.bound("dep-data")
		if pv.Annotations["pv.kubernetes.io/provisioned-by"] != hostpathName {
			t.Errorf("PV %s annotations %v: want provisioned by %s", pv.Name, pv.Annotations, hostpathName)
		}
		vas, err := env.Client.StorageV1().VolumeAttachments().List(h.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		attached := false
		for _, va := range vas.Items {
			if va.Spec.Source.PersistentVolumeName != nil && *va.Spec.Source.PersistentVolumeName == pv.Name {
				attached = va.Status.Attached && va.Spec.Attacher == hostpathName
			}
		}
		if !attached {
			t.Errorf("no attached VolumeAttachment for %s by the Deployment's attacher: %+v", pv.Name, vas.Items)
		}
		h.deletePod("dep-writer")
		h.noPodMounts(string(w.UID))
		h.createPod(h.podSpec("dep-reader", "cat /data/f > /dev/termination-log", pvcVolume("data", "dep-data")))
		if got := h.succeeded("dep-reader"); got != "written-through-deploy\n" {
			t.Fatalf("a new pod read %q, want what the deleted pod wrote", got)
		}
		h.deletePod("dep-reader")
		provisioned = true
		t.Logf("provisioned, attached, written and read back in %s", time.Since(t0).Round(time.Millisecond))
	})

	t.Run("controller-sidecars-resize-snapshot", func(t *testing.T) {
		h := &h{t: t, env: env, ctx: context.Background()}
		if !provisioned {
			t.Skip("needs the claim of controller-sidecars-provision-attach-publish")
		}
		t0 := time.Now()
		// The Deployment's resizer (controller expansion of a directory
		// volume) and csi-snapshotter, with volumesnapshotclass.yaml.
		h.patchPVCSize("dep-data", "96Mi")
		kube.WaitFor(t, kubeletWait, "PV of dep-data grown to 96Mi", func(ctx context.Context) (bool, string, error) {
			c, err := env.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "dep-data", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			pv, err := env.Client.CoreV1().PersistentVolumes().Get(ctx, c.Spec.VolumeName, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			q := pv.Spec.Capacity[corev1.ResourceStorage]
			return q.Cmp(resource.MustParse("96Mi")) >= 0, fmt.Sprintf("PV capacity %s; events: %s", q.String(), h.events(ctx, "dep-data")), nil
		})
		class := "csikit-hostpath"
		src := "dep-data"
		snap := &snapv1.VolumeSnapshot{
			ObjectMeta: metav1.ObjectMeta{Name: "dep-snap", Namespace: ns},
			Spec: snapv1.VolumeSnapshotSpec{VolumeSnapshotClassName: &class,
				Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &src}},
		}
		if _, err := env.Snapshots.SnapshotV1().VolumeSnapshots(ns).Create(h.ctx, snap, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		env.WaitSnapshotReady(t, kubeletWait, ns, "dep-snap")
		if err := env.Snapshots.SnapshotV1().VolumeSnapshots(ns).Delete(h.ctx, "dep-snap", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		kube.WaitFor(t, kubeletWait, "VolumeSnapshotContents deleted", func(ctx context.Context) (bool, string, error) {
			l, err := env.Snapshots.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, "", err
			}
			return len(l.Items) == 0, fmt.Sprintf("%d left", len(l.Items)), nil
		})
		t.Logf("resized and snapshotted in %s", time.Since(t0).Round(time.Millisecond))
	})

	t.Run("node-plugin-pod-replaced-while-a-pod-runs", func(t *testing.T) {
		h := &h{t: t, env: env, ctx: context.Background()}
		if !provisioned {
			t.Skip("needs the claim of controller-sidecars-provision-attach-publish")
		}
		t0 := time.Now()
		// A writer stamps a counter through its mount while the DaemonSet's
		// pod is deleted and replaced: the stage and publish mounts the old
		// container made (Bidirectional) outlive it, and the new one
		// registers itself again and publishes the volume to a new pod.
		uid := h.writerSurvives("dep", "dep-data", "the node plugin's replacement", "cat /data/f;", "written-through-deploy\n", func() {
			old, err := env.Client.CoreV1().Pods(deployNS).List(h.ctx, metav1.ListOptions{LabelSelector: "app=csikit-hostpath-node"})
			if err != nil || len(old.Items) != 1 {
				t.Fatalf("the DaemonSet's pod: %v %v", old, err)
			}
			grace := int64(1)
			if err := env.Client.CoreV1().Pods(deployNS).Delete(h.ctx, old.Items[0].Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
				t.Fatal(err)
			}
			kube.WaitFor(t, kubeletWait, "a new DaemonSet pod Ready", func(ctx context.Context) (bool, string, error) {
				ok, msg, err := env.PodsReady(ctx, deployNS, "app=csikit-hostpath-node", 1, 1)
				if !ok || err != nil {
					return ok, msg, err
				}
				pods, err := env.Client.CoreV1().Pods(deployNS).List(ctx, metav1.ListOptions{LabelSelector: "app=csikit-hostpath-node"})
				if err != nil {
					return false, "", err
				}
				return pods.Items[0].UID != old.Items[0].UID, "the old pod is still there", nil
			})
		})
		h.noPodMounts(uid)
		t.Logf("node plugin pod replaced under a running pod in %s", time.Since(t0).Round(time.Millisecond))
	})

	t.Run("delete-pods-unpublishes-before-the-driver-goes", func(t *testing.T) {
		h := &h{t: t, env: env, ctx: context.Background()}
		if !provisioned {
			t.Skip("needs the claim of controller-sidecars-provision-attach-publish")
		}
		t0 := time.Now()
		// Env.DeletePods is what the environment's Cleanup runs, also while
		// a suite's last pods still hold volumes: the driver's own pods (the
		// DaemonSet's, the Deployment's) must outlive them, or kubelet
		// cannot unpublish and the pods never go.
		w := h.podSpec("dep-holder", "sleep 3600", pvcVolume("data", "dep-data"))
		h.createPod(w)
		w = h.ready("dep-holder")
		if len(h.podMounts(string(w.UID))) == 0 {
			t.Fatal("the running pod has no volume mount below kubelet's pods directory")
		}
		if err := env.DeletePods(h.ctx, kubeletWait); err != nil {
			t.Fatal(err)
		}
		h.noPodMounts(string(w.UID))
		t.Logf("pods deleted, the volume's first, in %s", time.Since(t0).Round(time.Millisecond))
		// The driver again, for the teardown's claim deletion.
		applyHostpathDriver(t, env)
		kube.WaitFor(t, kubeletWait, "the driver's pods Ready again", func(ctx context.Context) (bool, string, error) {
			if ok, msg, err := env.PodsReady(ctx, deployNS, "app=csikit-hostpath-node", 1, 1); !ok || err != nil {
				return ok, msg, err
			}
			return env.PodsReady(ctx, deployNS, "app=csikit-hostpath-controller", 1, 4)
		})
	})
}

// deployTeardown deletes the test's pods, then its claims, and waits for
// the PVs to be gone (deleted through the Deployment's provisioner and the
// DaemonSet's driver, which keep running until the environment's Cleanup).
func deployTeardown(t *testing.T, env *kube.Env) {
	ctx := context.Background()
	c := env.Client
	grace := int64(1)
	if err := c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{}); err != nil {
		t.Error(err)
	}
	if err := kube.Poll(ctx, kubeletWait, func(ctx context.Context) (bool, string, error) {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods left", len(pods.Items)), nil
	}); err != nil {
		t.Errorf("teardown: %v", err)
	}
	if err := c.CoreV1().PersistentVolumeClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Error(err)
	}
	if err := kube.Poll(ctx, kubeletWait, func(ctx context.Context) (bool, string, error) {
		pvs, err := c.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		vas, err := c.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(pvs.Items)+len(vas.Items) == 0, fmt.Sprintf("%d PVs and %d VolumeAttachments left", len(pvs.Items), len(vas.Items)), nil
	}); err != nil {
		t.Errorf("teardown: %v", err)
	}
}

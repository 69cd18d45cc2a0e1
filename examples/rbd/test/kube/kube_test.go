//go:build linux

// Package kube_test runs the rbd driver binary under the real Kubernetes
// CSI machinery of csikit's sanity/kube (etcd, kube-apiserver,
// kube-controller-manager, snapshot-controller, csi-provisioner,
// csi-attacher, csi-resizer, csi-snapshotter as local processes) against
// the throwaway Ceph cluster of test/cluster.sh, with the StorageClass,
// VolumeSnapshotClass, Secret, CSIDriver and RBAC of deploy/ applied, and
// checks both the API objects and the pool. TestKube is the controller
// side only: no kubelet runs, so nothing is staged or mounted.
// TestKubeNodeLoss runs two kubelets (sanity/kube's kubelet mode) with a
// node plugin each, and moves a volume off a hung node: fencing end to
// end. TestE2E (opt-in, sanity/kube/e2e/run.sh rbd) runs Kubernetes' own
// storage e2e suite against the driver deployed with every deploy/
// manifest on sanity/kube's kubelet mode, node plugin included.
package kube_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rados"
	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/k8s/keys"
	"github.com/csikit/csikit/sanity/kube"
)

const (
	driverName = "rbd.csikit.dev"
	// class is the name of deploy/'s StorageClass and VolumeSnapshotClass.
	class = "csikit-rbd"
	// secretNS is the namespace of deploy/secret.yaml.
	secretNS = "csikit-rbd"
	// ns holds the test's claims and snapshots.
	ns   = "apps"
	wait = 90 * time.Second
	// journalNS is the RADOS namespace of the driver's journal (README).
	journalNS = "csikit-journal"
)

// TestKube provisions, snapshots, restores, clones, expands and deletes
// rbd volumes through the sidecars, with the credentials of a Ceph user
// allowed only the test's pool, from a Kubernetes Secret that deploy/'s
// StorageClass and VolumeSnapshotClass reference.
func TestKube(t *testing.T) {
	start := time.Now()
	c := cephtest.Require(t)
	binDir := kubeBinaries(t)
	pool, secrets := cephtest.TenantPool(t, c)
	admin := cephtest.Admin(t, c)
	bin := buildDriver(t)

	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	// The sidecars reach the driver through a recording proxy, to check
	// which secrets each call carried.
	proxy := kube.StartProxy(t, "unix://"+sock)
	env := kube.Start(t, kube.Options{
		Endpoint: proxy.Endpoint, DriverName: driverName, NodeName: "node-1", BinDir: binDir,
		Timeout: 30 * time.Second, // CreateVolume of a clone can take a few seconds on a loaded host
		Driver: &kube.ProcessOptions{
			Name: "rbd", Path: bin, Restart: true,
			// No key here: credentials come from the Secret only.
			Args: []string{"--endpoint=unix://" + sock, "--nodeid=node-1", "--monitors=" + c.Monitors,
				"--pool=" + pool, "--state-dir=" + filepath.Join(dir, "state"), "--mapper=rbd-fuse"},
		},
	})
	applyDeploy(t, env, pool, secrets)
	if _, err := env.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("environment ready in %s", time.Since(start).Round(time.Millisecond))
	h := &h{t: t, env: env, ctx: context.Background(), admin: admin, pool: pool}

	// The volumes of the scenarios below: every one is deleted by "delete"
	// at the end, which then finds the pool empty.
	if !t.Run("pvc-bound", func(t *testing.T) { h.with(t).bound("vol", "64Mi") }) {
		return // the rest needs a volume
	}
	t.Run("snapshot-restore", func(t *testing.T) { h.with(t).snapshotRestore("vol") })
	t.Run("clone", func(t *testing.T) { h.with(t).clone("vol") })
	t.Run("expand", func(t *testing.T) { h.with(t).expand() })
	t.Run("reclaim-delete", func(t *testing.T) { h.with(t).reclaimDelete() })
	t.Run("malformed-key", func(t *testing.T) { h.with(t).malformedKey() })
	t.Run("delete", func(t *testing.T) { h.with(t).deleteAll() })
	assertSecrets(t, proxy.Recorder, secrets)
	if p := env.Process("rbd"); p.Starts() != 1 {
		t.Errorf("the driver was started %d times, want 1 (it crashed)", p.Starts())
	}
}

// assertSecrets checks that every controller call the sidecars made
// carried the tenant's Secret (or, for the malformed-key class's
// CreateVolume, that Secret), and that no secret reference reached the
// driver as a parameter.
func assertSecrets(t *testing.T, rec *kube.Recorder, want map[string]string) {
	t.Helper()
	type withSecrets interface{ GetSecrets() map[string]string }
	for _, m := range []string{csi.Controller_CreateVolume_FullMethodName, csi.Controller_DeleteVolume_FullMethodName,
		csi.Controller_CreateSnapshot_FullMethodName, csi.Controller_DeleteSnapshot_FullMethodName,
		csi.Controller_ControllerExpandVolume_FullMethodName} {
		calls := rec.Calls(m)
		if len(calls) == 0 {
			t.Errorf("the driver got no %s", m)
		}
		for _, c := range calls {
			got := c.Request.(withSecrets).GetSecrets()
			if cv, ok := c.Request.(*csi.CreateVolumeRequest); ok {
				if got["userID"] == "kubernetes" { // malformed-key
					continue
				}
				for k := range cv.GetParameters() {
					if keys.IsSecretRef(k) {
						t.Errorf("CreateVolume %s: parameter %s reached the driver", cv.GetName(), k)
					}
				}
			}
			if len(got) != len(want) || got["userID"] != want["userID"] || got["userKey"] != want["userKey"] {
				t.Errorf("%s: got %d secrets (userID %q), want the tenant's Secret (userID %q)", m, len(got), got["userID"], want["userID"])
			}
		}
	}
}

// kubeBinaries returns sanity/kube's prebuilt binaries, or skips (fails
// under CSIKIT_STRICT_TESTS=1) when they are not built: a cold build takes
// many minutes, which belongs to CI's build step, not a test's timeout.
func kubeBinaries(t *testing.T) string {
	t.Helper()
	dir, err := kube.BinariesDir(kube.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := kube.MissingBinaries(dir); len(m) > 0 {
		cephtest.Skipf(t, "the Kubernetes binaries are not built (%s lacks %v): run `go run ./internal/buildtools` in sanity/kube", dir, m)
	}
	return dir
}

// buildDriver builds the rbd binary into a temporary directory.
func buildDriver(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		cephtest.Skipf(t, "needs the go command to build the driver: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "rbd")
	out, err := exec.Command("go", "build", "-tags", "pacific", "-o", bin, "github.com/csikit/csikit/examples/rbd").CombinedOutput()
	if err != nil {
		t.Fatalf("build the rbd driver: %v\n%s", err, out)
	}
	return bin
}

// applyDeploy creates deploy/'s RBAC, CSIDriver, Secret (with the tenant's
// credentials), StorageClass (pointed at the test's pool) and
// VolumeSnapshotClass, otherwise as shipped.
func applyDeploy(t *testing.T, env *kube.Env, pool string, secrets map[string]string) {
	t.Helper()
	edit := func(obj any) error {
		switch o := obj.(type) {
		case *corev1.Secret:
			if o.StringData["userID"] == "" || o.StringData["userKey"] == "" {
				return errors.New("deploy/secret.yaml: want userID and userKey in stringData")
			}
			o.StringData = secrets
		case *storagev1.StorageClass:
			if o.Parameters["pool"] == "" {
				return errors.New("deploy/storageclass.yaml: want a pool parameter")
			}
			o.Parameters["pool"] = pool
		}
		return nil
	}
	for _, f := range []string{"rbac.yaml", "csidriver.yaml", "secret.yaml", "storageclass.yaml", "volumesnapshotclass.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Apply(context.Background(), b, edit); err != nil {
			t.Fatalf("deploy/%s: %v", f, err)
		}
	}
}

// h carries the environment and the pool into the scenarios.
type h struct {
	t     *testing.T
	env   *kube.Env
	ctx   context.Context
	admin *rados.Conn
	pool  string
}

func (h *h) with(t *testing.T) *h { c := *h; c.t = t; return &c }

func (h *h) pvc(name, size string, mutate func(*corev1.PersistentVolumeClaim)) {
	h.t.Helper()
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if mutate != nil {
		mutate(c)
	}
	if _, err := h.env.Client.CoreV1().PersistentVolumeClaims(ns).Create(h.ctx, c, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("create PVC %s: %v", name, err)
	}
}

// bound creates a claim, waits for it to be Bound, and checks the PV and
// the image behind it.
func (h *h) bound(name, size string) *corev1.PersistentVolume {
	h.t.Helper()
	h.pvc(name, size, nil)
	return h.checkBound(name, size)
}

// checkBound waits for the claim to be Bound and checks the PV (driver,
// the secret references the sidecars and kubelet need, capacity) and that
// the pool holds the image of its handle, of that size, with a committed
// journal record under the PV's name.
func (h *h) checkBound(name, size string) *corev1.PersistentVolume {
	h.t.Helper()
	want := resource.MustParse(size)
	c, pv := h.env.WaitPVCBound(h.t, wait, ns, name)
	src := pv.Spec.CSI
	if src == nil || src.Driver != driverName {
		h.t.Fatalf("PV %s: got CSI source %+v, want driver %s", pv.Name, src, driverName)
	}
	ref := &corev1.SecretReference{Name: "csikit-rbd-secret", Namespace: secretNS}
	if !equalRef(src.NodeStageSecretRef, ref) || !equalRef(src.ControllerExpandSecretRef, ref) {
		h.t.Errorf("PV %s secret references: node stage %v, controller expand %v; want %v (deploy/storageclass.yaml)",
			pv.Name, src.NodeStageSecretRef, src.ControllerExpandSecretRef, ref)
	}
	if got := pv.Spec.Capacity[corev1.ResourceStorage]; got.Value() != want.Value() {
		h.t.Errorf("PV %s capacity: got %s, want %s", pv.Name, got.String(), size)
	}
	if got := c.Status.Capacity[corev1.ResourceStorage]; got.Value() != want.Value() {
		h.t.Errorf("PVC %s capacity: got %s, want %s", name, got.String(), size)
	}
	if got := h.imageSize(imageOf(h.t, src.VolumeHandle)); got != uint64(want.Value()) {
		h.t.Errorf("image of %s: got %d bytes, want %d", src.VolumeHandle, got, want.Value())
	}
	// The journal: the name object of the CreateVolume name (the PV's)
	// and the ID object of the handle (README's layout).
	objs := h.contents().Objects
	for _, o := range []string{"volume.name." + hashed(pv.Name), "volume.id." + hashed(src.VolumeHandle)} {
		if !slices.Contains(objs, o) {
			h.t.Errorf("journal of %s: no object %s among %v", pv.Name, o, objs)
		}
	}
	return pv
}

func equalRef(a, b *corev1.SecretReference) bool { return a != nil && *a == *b }

// snapshotRestore takes a VolumeSnapshot of the claim, checks the RBD
// snapshot behind its handle, restores it into a new claim and checks that
// the new image is a clone of exactly that snapshot.
func (h *h) snapshotRestore(src string) {
	_, err := h.env.Snapshots.SnapshotV1().VolumeSnapshots(ns).Create(h.ctx, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: ns},
		Spec: snapv1.VolumeSnapshotSpec{VolumeSnapshotClassName: ptr.To(class),
			Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To(src)}},
	}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("create VolumeSnapshot: %v", err)
	}
	vs, content := h.env.WaitSnapshotReady(h.t, wait, ns, "snap")
	if got := ptr.Deref(vs.Status.RestoreSize, resource.Quantity{}); got.Value() != 64<<20 {
		h.t.Errorf("VolumeSnapshot restoreSize: got %s, want 64Mi", got.String())
	}
	handle := ptr.Deref(content.Status.SnapshotHandle, "")
	image, snap := snapshotOf(h.t, handle)
	if !slices.Contains(h.snapshots(image), snap) {
		h.t.Errorf("snapshot handle %s: image %s has no snapshot %s (has %v)", handle, image, snap, h.snapshots(image))
	}

	h.pvc("restore", "64Mi", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To(snapv1.GroupName), Kind: "VolumeSnapshot", Name: "snap"}
	})
	pv := h.checkBound("restore", "64Mi")
	parent := h.parent(imageOf(h.t, pv.Spec.CSI.VolumeHandle))
	if parent.Image.ImageName != image || parent.Snap.SnapName != snap {
		h.t.Errorf("restored image's parent: got %s@%s, want %s@%s", parent.Image.ImageName, parent.Snap.SnapName, image, snap)
	}
}

// clone makes a claim with another claim as its data source: a clone-v2
// image whose parent is the source's image.
func (h *h) clone(src string) {
	srcPV := h.pvOf(src)
	h.pvc("clone", "64Mi", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: src}
	})
	pv := h.checkBound("clone", "64Mi")
	want := imageOf(h.t, srcPV.Spec.CSI.VolumeHandle)
	got := imageOf(h.t, pv.Spec.CSI.VolumeHandle)
	if got == want {
		h.t.Fatalf("clone's handle names the source image %s", want)
	}
	if p := h.parent(got); p.Image.ImageName != want {
		h.t.Errorf("clone's parent image: got %q, want the source's %q", p.Image.ImageName, want)
	}
}

// expand grows a claim: csi-resizer's ControllerExpandVolume (with the
// controller-expand Secret) grows the image and the PV. rbd asks for the
// node step for a filesystem volume, which needs kubelet: the claim keeps
// its size and waits in FileSystemResizePending.
func (h *h) expand() {
	pv := h.bound("grow", "64Mi")
	patch := `{"spec":{"resources":{"requests":{"storage":"128Mi"}}}}`
	if _, err := h.env.Client.CoreV1().PersistentVolumeClaims(ns).Patch(h.ctx, "grow", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		h.t.Fatalf("resize PVC: %v", err)
	}
	kube.WaitFor(h.t, wait, "PV grown and PVC waiting for the node step", func(ctx context.Context) (bool, string, error) {
		got, err := h.env.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		c, err := h.env.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "grow", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		q := got.Spec.Capacity[corev1.ResourceStorage]
		return q.Value() == 128<<20 && kube.FileSystemResizePending(c), fmt.Sprintf("PV capacity %s, PVC conditions %+v; events: %s",
			q.String(), c.Status.Conditions, h.env.Events(ctx, ns, "grow")), nil
	})
	c, err := h.env.Client.CoreV1().PersistentVolumeClaims(ns).Get(h.ctx, "grow", metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if q := c.Status.Capacity[corev1.ResourceStorage]; q.Value() != 64<<20 {
		h.t.Errorf("PVC capacity before the node step: got %s, want 64Mi", q.String())
	}
	if got := h.imageSize(imageOf(h.t, pv.Spec.CSI.VolumeHandle)); got != 128<<20 {
		h.t.Errorf("image after ControllerExpandVolume: got %d bytes, want %d", got, 128<<20)
	}
}

// reclaimDelete deletes a claim of a Delete class on its own: the PV goes,
// and so do its image and both of its journal objects.
func (h *h) reclaimDelete() {
	pv := h.bound("short", "16Mi")
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		h.t.Errorf("PV reclaim policy: got %s, want Delete (deploy/storageclass.yaml)", pv.Spec.PersistentVolumeReclaimPolicy)
	}
	image := imageOf(h.t, pv.Spec.CSI.VolumeHandle)
	h.deletePVC("short")
	h.env.WaitPVDeleted(h.t, wait, pv.Name)
	got := h.contents()
	if slices.Contains(got.Images, image) || slices.Contains(got.Trash, image) {
		h.t.Errorf("image %s still in the pool after its PV was deleted: %+v", image, got)
	}
	for _, o := range []string{"volume.name." + hashed(pv.Name), "volume.id." + hashed(pv.Spec.CSI.VolumeHandle)} {
		if slices.Contains(got.Objects, o) {
			h.t.Errorf("journal object %s of deleted PV %s left", o, pv.Name)
		}
	}
}

// malformedKey provisions with a Secret whose key is base64 letters but no
// cephx key: CreateVolume answers InvalidArgument, and neither the event
// nor the driver's log shows the key (librados prints a key it cannot
// decode, so the driver must refuse it before librados sees it).
func (h *h) malformedKey() {
	const key = "AQBr0wJnAAAAABAAnotAcephxKeyButBase64Letters=="
	_, err := h.env.Client.CoreV1().Secrets(secretNS).Create(h.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "malformed", Namespace: secretNS},
		StringData: map[string]string{"userID": "kubernetes", "userKey": key},
	}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	_, err = h.env.Client.StorageV1().StorageClasses().Create(h.ctx, &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: "malformed"},
		Provisioner: driverName,
		Parameters: map[string]string{"pool": h.pool,
			keys.ProvisionerSecretName: "malformed", keys.ProvisionerSecretNamespace: secretNS},
	}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.pvc("malformed", "16Mi", func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("malformed") })
	var msg string
	kube.WaitFor(h.t, wait, "ProvisioningFailed on PVC malformed", func(ctx context.Context) (bool, string, error) {
		msg = h.env.Events(ctx, ns, "malformed")
		return strings.Contains(msg, "ProvisioningFailed"), msg, nil
	})
	if !strings.Contains(msg, "InvalidArgument") {
		h.t.Errorf("events: got %q, want a ProvisioningFailed with InvalidArgument", msg)
	}
	log, err := os.ReadFile(h.env.Process("rbd").LogPath)
	if err != nil {
		h.t.Fatal(err)
	}
	for what, text := range map[string]string{"the events": msg, "the driver's log": string(log)} {
		if strings.Contains(text, key[8:]) {
			h.t.Errorf("the Secret's key appears in %s", what)
		}
	}
	h.deletePVC("malformed")
}

// deleteAll deletes the source claim first, while it still has a
// snapshot and two clones: its PV goes and its image is hidden as
// csi-del-<k><hex> (README). Then the snapshot, then the clones and the
// rest: once every PV and snapshot content is gone, the pool holds no
// image (the hidden one reaped with its last clone), no trash entry and
// no journal object.
func (h *h) deleteAll() {
	src := h.pvOf("vol")
	srcImage := imageOf(h.t, src.Spec.CSI.VolumeHandle)
	before := h.contents()
	if !slices.Contains(before.Images, srcImage) {
		h.t.Fatalf("source image %s not in the pool before the deletes: %+v", srcImage, before)
	}
	pvs, err := h.env.Client.CoreV1().PersistentVolumes().List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.deletePVC("vol")
	h.env.WaitPVDeleted(h.t, wait, src.Name)
	hidden := "csi-del-" + strings.TrimPrefix(srcImage, "csi-vol-")
	if got := h.contents(); slices.Contains(got.Images, srcImage) || !slices.Contains(got.Images, hidden) {
		h.t.Errorf("after deleting the source with a snapshot and clones: got images %v, want %s hidden as %s", got.Images, srcImage, hidden)
	}

	if err := h.env.Snapshots.SnapshotV1().VolumeSnapshots(ns).Delete(h.ctx, "snap", metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
	kube.WaitFor(h.t, wait, "every VolumeSnapshotContent deleted", func(ctx context.Context) (bool, string, error) {
		l, err := h.env.Snapshots.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		return len(l.Items) == 0, fmt.Sprintf("%d left", len(l.Items)), nil
	})

	for _, name := range []string{"restore", "clone", "grow"} {
		h.deletePVC(name)
	}
	for _, pv := range pvs.Items {
		h.env.WaitPVDeleted(h.t, wait, pv.Name)
	}
	if got := h.contents(); !got.Empty() {
		h.t.Errorf("pool %s after every PV and snapshot was deleted: got %+v, want no image, trash or journal object (before: %+v)", h.pool, got, before)
	}
}

func (h *h) deletePVC(name string) {
	h.t.Helper()
	if err := h.env.Client.CoreV1().PersistentVolumeClaims(ns).Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		h.t.Fatalf("delete PVC %s: %v", name, err)
	}
}

func (h *h) pvOf(claim string) *corev1.PersistentVolume {
	h.t.Helper()
	_, pv := h.env.WaitPVCBound(h.t, wait, ns, claim)
	return pv
}

func (h *h) contents() cephtest.Contents {
	h.t.Helper()
	return cephtest.PoolContents(h.t, h.admin, h.pool, journalNS)
}

// open opens an image of the test's pool read-only as the admin.
func (h *h) open(image string) *rbd.Image {
	h.t.Helper()
	io, err := h.admin.OpenIOContext(h.pool)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(io.Destroy)
	img, err := rbd.OpenImageReadOnly(io, image, rbd.NoSnapshot)
	if err != nil {
		h.t.Fatalf("open image %s: %v", image, err)
	}
	h.t.Cleanup(func() { _ = img.Close() })
	return img
}

func (h *h) imageSize(image string) uint64 {
	h.t.Helper()
	n, err := h.open(image).GetSize()
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *h) snapshots(image string) []string {
	h.t.Helper()
	snaps, err := h.open(image).GetSnapshotNames()
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, s := range snaps {
		out = append(out, s.Name)
	}
	return out
}

func (h *h) parent(image string) *rbd.ParentInfo {
	h.t.Helper()
	p, err := h.open(image).GetParent()
	if err != nil {
		h.t.Fatalf("parent of image %s: %v", image, err)
	}
	return p
}

// imageOf is the image of a volume ID: <pool ID>-<k><32 hex> is image
// csi-vol-<k><hex> (README, "IDs and the journal layout").
func imageOf(t *testing.T, id string) string {
	t.Helper()
	_, local, ok := strings.Cut(id, "-")
	if !ok || len(local) != 33 {
		t.Fatalf("volume handle %q: want <pool ID>-<k><32 hex>", id)
	}
	return "csi-vol-" + local
}

// snapshotOf is the image and RBD snapshot of a snapshot ID:
// <pool ID>-<k><hex>-<32 hex> is csi-snap-<32 hex> of image csi-vol-<k><hex>.
func snapshotOf(t *testing.T, id string) (image, snap string) {
	t.Helper()
	i := strings.LastIndex(id, "-")
	if i < 0 || len(id)-i-1 != 32 {
		t.Fatalf("snapshot handle %q: want <volume ID>-<32 hex>", id)
	}
	return imageOf(t, id[:i]), "csi-snap-" + id[i+1:]
}

func hashed(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

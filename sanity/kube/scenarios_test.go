package kube_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/csikit/csikit/sanity/kube"
)

type scenario struct {
	name string
	run  func(h *h, o observer)
	// fakeOnly scenarios steer the fake driver through parameters or
	// depend on its access modes.
	fakeOnly bool
}

// apiScenarios run in parallel against one environment; each uses its own
// StorageClass and PVC names.
var apiScenarios = []scenario{
	{"immediate-parameters-secrets", immediate, false},
	{"wait-for-first-consumer", waitForFirstConsumer, false},
	{"topology", topology, false},
	{"snapshot-restore", snapshotRestore, false},
	{"clone", clone, false},
	{"expand-controller", func(h *h, o observer) { expand(h, o, false) }, false},
	{"expand-node-step", func(h *h, o observer) { expand(h, o, true) }, true},
	{"attach-detach", attachDetach, false},
	{"access-modes", accessModes, true},
	{"reclaim-delete", func(h *h, o observer) { reclaim(h, o, corev1.PersistentVolumeReclaimDelete) }, false},
	{"reclaim-retain", func(h *h, o observer) { reclaim(h, o, corev1.PersistentVolumeReclaimRetain) }, false},
}

// immediate: PVC → PV Bound; StorageClass parameters and provisioner
// secrets reach CreateVolume, the secret references do not.
func immediate(h *h, o observer) {
	_, err := h.env.Client.CoreV1().Secrets(ns).Create(h.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "prov-secret", Namespace: ns},
		StringData: map[string]string{"user": "admin", "key": "s3cret"},
	}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("create Secret: %v", err)
	}
	h.storageClass("immediate", func(sc *storagev1.StorageClass) {
		sc.Parameters["tier"] = "gold"
		sc.Parameters["csi.storage.k8s.io/provisioner-secret-name"] = "prov-secret"
		sc.Parameters["csi.storage.k8s.io/provisioner-secret-namespace"] = ns
	})
	h.pvc("immediate", "immediate", "1Gi", nil)
	c, pv := h.bound("immediate")
	reqs := o.createsNamed(pv.Name)
	if len(reqs) == 0 {
		h.t.Fatalf("driver got no CreateVolume named %s", pv.Name)
	}
	r := reqs[len(reqs)-1]
	if got := r.GetParameters()["tier"]; got != "gold" {
		h.t.Errorf("CreateVolume parameter tier: got %q, want gold", got)
	}
	if got := r.GetParameters()["csi.storage.k8s.io/pvc/name"]; got != "immediate" {
		h.t.Errorf("CreateVolume parameter pvc/name: got %q, want immediate (--extra-create-metadata)", got)
	}
	for k := range r.GetParameters() {
		if strings.Contains(k, "secret") {
			h.t.Errorf("CreateVolume parameters carry %q, want secret references stripped", k)
		}
	}
	if got, want := r.GetSecrets(), map[string]string{"user": "admin", "key": "s3cret"}; fmt.Sprint(got) != fmt.Sprint(want) {
		h.t.Errorf("CreateVolume secrets: got %d keys, want the Secret's %d keys", len(got), len(want))
	}
	if got := r.GetCapacityRange().GetRequiredBytes(); got != 1<<30 {
		h.t.Errorf("CreateVolume required bytes: got %d, want %d", got, 1<<30)
	}
	if o.volume(pv.Spec.CSI.VolumeHandle) == nil {
		h.t.Errorf("PV %s volume handle %s: not in the driver", pv.Name, pv.Spec.CSI.VolumeHandle)
	}
	if got := capOf(c); got != 1<<30 {
		h.t.Errorf("PVC capacity: got %d, want %d", got, 1<<30)
	}
}

// waitForFirstConsumer: nothing is provisioned until the scheduler's
// selected-node annotation appears; then the node's topology is preferred.
func waitForFirstConsumer(h *h, o observer) {
	h.storageClass("wffc", func(sc *storagev1.StorageClass) {
		sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
	})
	c := h.pvc("wffc", "wffc", "1Gi", nil)
	h.event("wffc", "WaitForFirstConsumer")
	if got := o.createsNamed("pvc-" + string(c.UID)); len(got) != 0 {
		h.t.Fatalf("got %d CreateVolume calls before a node was selected, want 0", len(got))
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":%q}}}`, h.env.Opts.NodeName)
	if _, err := h.env.Client.CoreV1().PersistentVolumeClaims(ns).Patch(h.ctx, "wffc", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		h.t.Fatalf("annotate PVC: %v", err)
	}
	_, pv := h.bound("wffc")
	reqs := o.createsNamed(pv.Name)
	if len(reqs) == 0 {
		h.t.Fatalf("driver got no CreateVolume named %s", pv.Name)
	}
	pref := reqs[len(reqs)-1].GetAccessibilityRequirements().GetPreferred()
	if len(pref) == 0 || pref[0].GetSegments()[h.zoneKey] != h.zone {
		h.t.Errorf("CreateVolume preferred topology: got %v, want first %s=zone-a (the selected node's)", pref, h.zoneKey)
	}
	assertAffinity(h, pv, h.zone)
}

// topology: allowedTopologies reach CreateVolume as requisite topology; the
// driver's accessible topology becomes the PV's node affinity.
func topology(h *h, o observer) {
	h.storageClass("topo", func(sc *storagev1.StorageClass) {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: h.zoneKey, Values: []string{h.zone}}}}}
	})
	h.pvc("topo", "topo", "1Gi", nil)
	_, pv := h.bound("topo")
	reqs := o.createsNamed(pv.Name)
	if len(reqs) == 0 {
		h.t.Fatalf("driver got no CreateVolume named %s", pv.Name)
	}
	reqd := reqs[len(reqs)-1].GetAccessibilityRequirements().GetRequisite()
	if len(reqd) != 1 || reqd[0].GetSegments()[h.zoneKey] != h.zone {
		h.t.Errorf("CreateVolume requisite topology: got %v, want [%s=zone-a]", reqd, h.zoneKey)
	}
	assertAffinity(h, pv, h.zone)
}

func assertAffinity(h *h, pv *corev1.PersistentVolume, zone string) {
	h.t.Helper()
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil || len(na.Required.NodeSelectorTerms) == 0 {
		h.t.Fatalf("PV %s: got no node affinity, want %s=%s", pv.Name, h.zoneKey, zone)
	}
	for _, e := range na.Required.NodeSelectorTerms[0].MatchExpressions {
		if e.Key == h.zoneKey && len(e.Values) == 1 && e.Values[0] == zone {
			return
		}
	}
	h.t.Errorf("PV %s node affinity: got %+v, want %s=%s", pv.Name, na.Required.NodeSelectorTerms, h.zoneKey, zone)
}

// snapshotRestore: VolumeSnapshot ready, then restored into a new PVC whose
// CreateVolume names the snapshot as its source.
func snapshotRestore(h *h, o observer) {
	h.storageClass("snap", nil)
	h.pvc("snap-src", "snap", "1Gi", nil)
	_, srcPV := h.bound("snap-src")
	_, err := h.env.Snapshots.SnapshotV1().VolumeSnapshotClasses().Create(h.ctx, &snapv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: "snap"}, Driver: h.env.Opts.DriverName,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
	}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("create VolumeSnapshotClass: %v", err)
	}
	_, err = h.env.Snapshots.SnapshotV1().VolumeSnapshots(ns).Create(h.ctx, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: ns},
		Spec: snapv1.VolumeSnapshotSpec{VolumeSnapshotClassName: ptr.To("snap"),
			Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: ptr.To("snap-src")}},
	}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("create VolumeSnapshot: %v", err)
	}
	vs, content := h.env.WaitSnapshotReady(h.t, wait, ns, "snap")
	calls := o.snapshotsOf(srcPV.Spec.CSI.VolumeHandle)
	if len(calls) == 0 {
		h.t.Fatalf("driver got no CreateSnapshot of volume %s", srcPV.Spec.CSI.VolumeHandle)
	}
	handle := ptr.Deref(content.Status.SnapshotHandle, "")
	if handle == "" {
		h.t.Fatalf("VolumeSnapshotContent %s has no snapshot handle", content.Name)
	}
	if got := ptr.Deref(vs.Status.RestoreSize, resource.Quantity{}); got.Value() != 1<<30 {
		h.t.Errorf("VolumeSnapshot restoreSize: got %s, want 1Gi", got.String())
	}

	h.pvc("snap-restore", "snap", "1Gi", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
	})
	_, pv := h.bound("snap-restore")
	reqs := o.createsNamed(pv.Name)
	if len(reqs) == 0 {
		h.t.Fatalf("driver got no CreateVolume named %s", pv.Name)
	}
	if got := reqs[len(reqs)-1].GetVolumeContentSource().GetSnapshot().GetSnapshotId(); got != handle {
		h.t.Errorf("restore CreateVolume snapshot source: got %q, want %q", got, handle)
	}
}

// clone: a PVC with another PVC as dataSource gets a CreateVolume whose
// source is that PVC's volume.
func clone(h *h, o observer) {
	h.storageClass("clone", nil)
	h.pvc("clone-src", "clone", "1Gi", nil)
	_, srcPV := h.bound("clone-src")
	h.pvc("clone", "clone", "1Gi", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "clone-src"}
	})
	_, pv := h.bound("clone")
	reqs := o.createsNamed(pv.Name)
	if len(reqs) == 0 {
		h.t.Fatalf("driver got no CreateVolume named %s", pv.Name)
	}
	if got, want := reqs[len(reqs)-1].GetVolumeContentSource().GetVolume().GetVolumeId(), srcPV.Spec.CSI.VolumeHandle; got != want {
		h.t.Errorf("clone CreateVolume volume source: got %q, want %q", got, want)
	}
}

// expand: the resizer calls ControllerExpandVolume; the PV grows, and the
// PVC either grows too or, when the driver asks for the node step, waits in
// FileSystemResizePending. nodeParam sets the fake's "nodeExpansion"
// parameter; with h.fake the driver's answer must follow it.
func expand(h *h, o observer, nodeParam bool) {
	name := "expand"
	if nodeParam {
		name = "expand-node"
	}
	h.storageClass(name, func(sc *storagev1.StorageClass) {
		sc.AllowVolumeExpansion = ptr.To(true)
		if nodeParam {
			sc.Parameters["nodeExpansion"] = "true"
		}
	})
	h.pvc(name, name, "1Gi", nil)
	_, pv := h.bound(name)
	h.patchPVCSize(name, "2Gi")
	var c *corev1.PersistentVolumeClaim
	kube.WaitFor(h.t, wait, "PVC "+name+" expanded or waiting for the node step", func(ctx context.Context) (bool, string, error) {
		var err error
		c, err = h.env.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		state := fmt.Sprintf("capacity %d, conditions %+v; events: %s", capOf(c), c.Status.Conditions, h.events(ctx, name))
		return capOf(c) == 2<<30 || kube.FileSystemResizePending(c), state, nil
	})
	needNode := o.expandNeedsNode(pv.Spec.CSI.VolumeHandle)
	if h.fake && needNode != nodeParam {
		h.t.Errorf("fake driver NodeExpansionRequired: got %v, want %v", needNode, nodeParam)
	}
	if needNode && (!kube.FileSystemResizePending(c) || capOf(c) != 1<<30) {
		h.t.Errorf("driver needs the node step: got PVC capacity %d, FileSystemResizePending %v; want %d and true", capOf(c), kube.FileSystemResizePending(c), 1<<30)
	}
	if !needNode && (kube.FileSystemResizePending(c) || capOf(c) != 2<<30) {
		h.t.Errorf("driver needs no node step: got PVC capacity %d, FileSystemResizePending %v; want %d and false", capOf(c), kube.FileSystemResizePending(c), 2<<30)
	}
	got, err := h.env.Client.CoreV1().PersistentVolumes().Get(h.ctx, pv.Name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if q := got.Spec.Capacity[corev1.ResourceStorage]; q.Value() != 2<<30 {
		h.t.Errorf("PV capacity: got %s, want 2Gi", q.String())
	}
	reqs := o.expandsOf(pv.Spec.CSI.VolumeHandle)
	if len(reqs) == 0 || reqs[len(reqs)-1].GetCapacityRange().GetRequiredBytes() != 2<<30 {
		h.t.Errorf("ControllerExpandVolume: got %v, want one with required bytes %d", reqs, 2<<30)
	}
	if v := o.volume(pv.Spec.CSI.VolumeHandle); v == nil || v.CapacityBytes != 2<<30 {
		h.t.Errorf("driver volume: got %v, want capacity %d", v, 2<<30)
	}
}

// attachDetach: a Pod on the fake Node makes the attach/detach controller
// create a VolumeAttachment that csi-attacher publishes; deleting the Pod
// detaches and unpublishes.
func attachDetach(h *h, o observer) {
	h.storageClass("attach", nil)
	h.pvc("attach", "attach", "1Gi", nil)
	_, pv := h.bound("attach")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "attach", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:   h.env.Opts.NodeName,
			Containers: []corev1.Container{{Name: "c", Image: "never.pulled.example/none"}},
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "attach"}}}},
		},
	}
	if _, err := h.env.Client.CoreV1().Pods(ns).Create(h.ctx, pod, metav1.CreateOptions{}); err != nil {
		h.t.Fatalf("create Pod: %v", err)
	}
	var vaName string
	kube.WaitFor(h.t, wait, "VolumeAttachment attached", func(ctx context.Context) (bool, string, error) {
		vas, err := h.env.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		for _, va := range vas.Items {
			if ptr.Deref(va.Spec.Source.PersistentVolumeName, "") == pv.Name {
				vaName = va.Name
				return va.Status.Attached, fmt.Sprintf("%s: %+v", va.Name, va.Status), nil
			}
		}
		return false, "no VolumeAttachment yet", nil
	})
	va, err := h.env.Client.StorageV1().VolumeAttachments().Get(h.ctx, vaName, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	if got, want := va.Status.AttachmentMetadata, o.publishContext(pv.Spec.CSI.VolumeHandle); fmt.Sprint(got) != fmt.Sprint(want) {
		h.t.Errorf("VolumeAttachment metadata: got %v, want the driver's publish context %v", got, want)
	}
	pubs, _ := o.publishesOf(pv.Spec.CSI.VolumeHandle)
	if len(pubs) == 0 || pubs[len(pubs)-1].GetNodeId() != h.env.Opts.NodeID {
		h.t.Fatalf("ControllerPublishVolume: got %v, want one for node ID %s", pubs, h.env.Opts.NodeID)
	}
	if err := h.env.Client.CoreV1().Pods(ns).Delete(h.ctx, "attach", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		h.t.Fatalf("delete Pod: %v", err)
	}
	kube.WaitFor(h.t, wait, "VolumeAttachment gone", func(ctx context.Context) (bool, string, error) {
		va, err := h.env.Client.StorageV1().VolumeAttachments().Get(ctx, vaName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("%+v", va.Status), nil
	})
	if _, unpubs := o.publishesOf(pv.Spec.CSI.VolumeHandle); len(unpubs) == 0 || unpubs[len(unpubs)-1].GetNodeId() != h.env.Opts.NodeID {
		h.t.Errorf("ControllerUnpublishVolume: got %v, want one for node ID %s", unpubs, h.env.Opts.NodeID)
	}
}

// accessModes: ReadWriteOncePod reaches the driver as SINGLE_NODE_SINGLE_WRITER
// (it advertises SINGLE_NODE_MULTI_WRITER); ReadWriteMany, which it does not
// serve, is refused before it runs and the PVC stays Pending with an event.
func accessModes(h *h, o observer) {
	h.storageClass("modes", nil)
	h.pvc("rwop", "modes", "1Gi", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod}
	})
	_, pv := h.bound("rwop")
	reqs := o.createsNamed(pv.Name)
	if len(reqs) == 0 || !hasMode(reqs[len(reqs)-1].GetVolumeCapabilities(), csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER) {
		h.t.Errorf("RWOP CreateVolume capabilities: got %v, want SINGLE_NODE_SINGLE_WRITER", reqs)
	}
	c := h.pvc("rwx", "modes", "1Gi", func(c *corev1.PersistentVolumeClaim) {
		c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	})
	msg := h.event("rwx", "ProvisioningFailed")
	if !strings.Contains(msg, "InvalidArgument") {
		h.t.Errorf("ProvisioningFailed event: got %q, want an InvalidArgument from the driver's validation", msg)
	}
	if got := o.createsNamed("pvc-" + string(c.UID)); len(got) != 0 {
		h.t.Errorf("driver code ran for an unsupported access mode: got %d CreateVolume calls, want 0", len(got))
	}
	c, err := h.env.Client.CoreV1().PersistentVolumeClaims(ns).Get(h.ctx, "rwx", metav1.GetOptions{})
	if err != nil || c.Status.Phase != corev1.ClaimPending {
		h.t.Errorf("RWX PVC: got phase %v (err %v), want Pending", c.Status.Phase, err)
	}
}

// reclaim: deleting the PVC deletes the volume under Delete and keeps it
// (PV Released, no DeleteVolume) under Retain.
func reclaim(h *h, o observer, policy corev1.PersistentVolumeReclaimPolicy) {
	name := "reclaim-" + strings.ToLower(string(policy))
	h.storageClass(name, func(sc *storagev1.StorageClass) { sc.ReclaimPolicy = &policy })
	h.pvc(name, name, "1Gi", nil)
	_, pv := h.bound(name)
	if pv.Spec.PersistentVolumeReclaimPolicy != policy {
		h.t.Errorf("PV reclaim policy: got %s, want %s", pv.Spec.PersistentVolumeReclaimPolicy, policy)
	}
	handle := pv.Spec.CSI.VolumeHandle
	h.deletePVC(name)
	if policy == corev1.PersistentVolumeReclaimDelete {
		h.env.WaitPVDeleted(h.t, wait, pv.Name)
	} else {
		kube.WaitFor(h.t, wait, "PV "+pv.Name+" Released", func(ctx context.Context) (bool, string, error) {
			got, err := h.env.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return got.Status.Phase == corev1.VolumeReleased, "phase " + string(got.Status.Phase), nil
		})
	}
	if policy == corev1.PersistentVolumeReclaimDelete {
		if !o.deleted(handle) || o.volume(handle) != nil {
			h.t.Errorf("Delete policy: got DeleteVolume(%s) %v and volume still present %v, want deleted", handle, o.deleted(handle), o.volume(handle) != nil)
		}
		return
	}
	if o.deleted(handle) || o.volume(handle) == nil {
		h.t.Errorf("Retain policy: got DeleteVolume(%s) %v, volume present %v; want kept", handle, o.deleted(handle), o.volume(handle) != nil)
	}
}

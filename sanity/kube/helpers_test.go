package kube_test

import (
	"context"

	"fmt"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/csikit/csikit/sanity/kube"
)

const (
	ns      = "csikit"
	zoneKey = "topology.csikit.example/zone"
	wait    = 60 * time.Second
)

// h carries one scenario's environment.
type h struct {
	t   *testing.T
	env *kube.Env
	ctx context.Context
	// zoneKey and zone are the fake Node's topology segment.
	zoneKey, zone string
	// params are added to every StorageClass's parameters.
	params map[string]string
	// fake is set for the fake driver, whose behaviour is known exactly.
	fake bool
}

// observer tells what a driver received and holds: the fake driver itself,
// or a Recorder plus the driver's ListVolumes for a real driver.
type observer interface {
	createsNamed(name string) []*csi.CreateVolumeRequest
	volume(id string) *csi.Volume
	deleted(id string) bool
	snapshotsOf(volID string) []*csi.CreateSnapshotRequest
	expandsOf(id string) []*csi.ControllerExpandVolumeRequest
	publishesOf(id string) ([]*csi.ControllerPublishVolumeRequest, []*csi.ControllerUnpublishVolumeRequest)
	publishContext(id string) map[string]string
	// expandNeedsNode is NodeExpansionRequired of the volume's last
	// successful ControllerExpandVolume.
	expandNeedsNode(id string) bool
}

func (h *h) storageClass(name string, mutate func(*storagev1.StorageClass)) *storagev1.StorageClass {
	h.t.Helper()
	del := corev1.PersistentVolumeReclaimDelete
	imm := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       h.env.Opts.DriverName,
		ReclaimPolicy:     &del,
		VolumeBindingMode: &imm,
		Parameters:        map[string]string{},
	}
	for k, v := range h.params {
		sc.Parameters[k] = v
	}
	if mutate != nil {
		mutate(sc)
	}
	sc, err := h.env.Client.StorageV1().StorageClasses().Create(h.ctx, sc, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("create StorageClass %s: %v", name, err)
	}
	return sc
}

func (h *h) pvc(name, sc, size string, mutate func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	h.t.Helper()
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &sc,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
	if mutate != nil {
		mutate(c)
	}
	c, err := h.env.Client.CoreV1().PersistentVolumeClaims(ns).Create(h.ctx, c, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatalf("create PVC %s: %v", name, err)
	}
	return c
}

// bound waits for the PVC to be Bound and returns it with its PV, a CSI
// volume of the environment's driver.
func (h *h) bound(name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	h.t.Helper()
	c, pv := h.env.WaitPVCBound(h.t, wait, ns, name)
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != h.env.Opts.DriverName {
		h.t.Fatalf("PV %s: got CSI source %+v, want driver %s", pv.Name, pv.Spec.CSI, h.env.Opts.DriverName)
	}
	return c, pv
}

// event waits for an event on the object with the reason, returning its message.
func (h *h) event(name, reason string) string {
	h.t.Helper()
	var msg string
	kube.WaitFor(h.t, wait, fmt.Sprintf("event %s on %s", reason, name), func(ctx context.Context) (bool, string, error) {
		evs, err := h.env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
		if err != nil {
			return false, "", err
		}
		for _, e := range evs.Items {
			if e.Reason == reason {
				msg = e.Message
				return true, "", nil
			}
		}
		return false, h.events(ctx, name), nil
	})
	return msg
}

func (h *h) events(ctx context.Context, name string) string { return h.env.Events(ctx, ns, name) }

func (h *h) deletePVC(name string) {
	h.t.Helper()
	if err := h.env.Client.CoreV1().PersistentVolumeClaims(ns).Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatalf("delete PVC %s: %v", name, err)
	}
}

func (h *h) patchPVCSize(name, size string) {
	h.t.Helper()
	patch := fmt.Sprintf(`{"spec":{"resources":{"requests":{"storage":%q}}}}`, size)
	if _, err := h.env.Client.CoreV1().PersistentVolumeClaims(ns).Patch(h.ctx, name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		h.t.Fatalf("resize PVC %s: %v", name, err)
	}
}

func (h *h) pvsOfClass(sc string) []corev1.PersistentVolume {
	h.t.Helper()
	pvs, err := h.env.Client.CoreV1().PersistentVolumes().List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatalf("list PVs: %v", err)
	}
	var out []corev1.PersistentVolume
	for _, pv := range pvs.Items {
		if pv.Spec.StorageClassName == sc {
			out = append(out, pv)
		}
	}
	return out
}

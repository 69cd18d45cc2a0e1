package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/yaml"
)

// Apply creates the objects of a YAML manifest (documents separated by
// "---"), e.g. a driver's deploy/ files. Each document is decoded strictly
// (an unknown field, or a field name in another case than the API's, is an
// error) into its typed object, which edit, when
// not nil, may change before it is created: fill in a Secret's key, point
// a StorageClass at a test pool. Kinds: Namespace, ServiceAccount, Secret,
// ClusterRole, ClusterRoleBinding, Role, RoleBinding, CSIDriver,
// StorageClass, VolumeSnapshotClass, DaemonSet, Deployment (whose pods run
// only in the kubelet mode); any other kind is an error.
// Documents holding only comments are skipped.
func (e *Env) Apply(ctx context.Context, manifest []byte, edit func(obj any) error) error {
	c, s := e.Client, e.Snapshots
	for i, doc := range strings.Split("\n"+string(manifest), "\n---") {
		// Converted once; duplicate keys are an error.
		j, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			return fmt.Errorf("kube: manifest document %d: %w", i, err)
		}
		var meta metav1.TypeMeta
		if err := json.Unmarshal(j, &meta); err != nil {
			return fmt.Errorf("kube: manifest document %d: %w", i, err)
		}
		if meta.Kind == "" {
			continue
		}
		var obj any
		var create func() error
		switch meta.Kind {
		case "Namespace":
			o := &corev1.Namespace{}
			obj, create = o, func() error { _, err := c.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{}); return err }
		case "ServiceAccount":
			o := &corev1.ServiceAccount{}
			obj, create = o, func() error {
				_, err := c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		case "Secret":
			o := &corev1.Secret{}
			obj, create = o, func() error {
				_, err := c.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		case "ClusterRole":
			o := &rbacv1.ClusterRole{}
			obj, create = o, func() error { _, err := c.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{}); return err }
		case "ClusterRoleBinding":
			o := &rbacv1.ClusterRoleBinding{}
			obj, create = o, func() error {
				_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		case "Role":
			o := &rbacv1.Role{}
			obj, create = o, func() error {
				_, err := c.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		case "RoleBinding":
			o := &rbacv1.RoleBinding{}
			obj, create = o, func() error {
				_, err := c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		case "CSIDriver":
			o := &storagev1.CSIDriver{}
			obj, create = o, func() error { _, err := c.StorageV1().CSIDrivers().Create(ctx, o, metav1.CreateOptions{}); return err }
		case "StorageClass":
			o := &storagev1.StorageClass{}
			obj, create = o, func() error {
				_, err := c.StorageV1().StorageClasses().Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		case "VolumeSnapshotClass":
			o := &snapv1.VolumeSnapshotClass{}
			obj, create = o, func() error {
				_, err := s.SnapshotV1().VolumeSnapshotClasses().Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		case "DaemonSet":
			o := &appsv1.DaemonSet{}
			obj, create = o, func() error {
				_, err := c.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		case "Deployment":
			o := &appsv1.Deployment{}
			obj, create = o, func() error {
				_, err := c.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
				return err
			}
		default:
			return fmt.Errorf("kube: manifest document %d: kind %s not supported", i, meta.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		if err := dec.Decode(obj); err != nil {
			return fmt.Errorf("kube: manifest document %d (%s): %w", i, meta.Kind, err)
		}
		// encoding/json matches field names in any case; the API server
		// does not, and would drop a "stringdata" without a word.
		if err := checkFieldCase(j, obj); err != nil {
			return fmt.Errorf("kube: manifest document %d (%s): %w", i, meta.Kind, err)
		}
		if edit != nil {
			if err := edit(obj); err != nil {
				return fmt.Errorf("kube: manifest document %d (%s): %w", i, meta.Kind, err)
			}
		}
		if err := create(); err != nil {
			return fmt.Errorf("kube: manifest document %d: create %s: %w", i, meta.Kind, err)
		}
	}
	return nil
}

// WaitPVCBound waits until the claim is Bound and returns it with its PV,
// failing t after timeout with the claim's phase and events.
func (e *Env) WaitPVCBound(t testing.TB, timeout time.Duration, namespace, name string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	t.Helper()
	var c *corev1.PersistentVolumeClaim
	WaitFor(t, timeout, "PVC "+namespace+"/"+name+" Bound", func(ctx context.Context) (bool, string, error) {
		var err error
		c, err = e.Client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return c.Status.Phase == corev1.ClaimBound, fmt.Sprintf("phase %s; events: %s", c.Status.Phase, e.Events(ctx, namespace, name)), nil
	})
	pv, err := e.Client.CoreV1().PersistentVolumes().Get(context.Background(), c.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get PV %s of PVC %s/%s: %v", c.Spec.VolumeName, namespace, name, err)
	}
	return c, pv
}

// WaitSnapshotReady waits until the VolumeSnapshot is ready to use and
// returns it with its bound VolumeSnapshotContent, failing t after timeout
// with the snapshot's status and events.
func (e *Env) WaitSnapshotReady(t testing.TB, timeout time.Duration, namespace, name string) (*snapv1.VolumeSnapshot, *snapv1.VolumeSnapshotContent) {
	t.Helper()
	var vs *snapv1.VolumeSnapshot
	WaitFor(t, timeout, "VolumeSnapshot "+namespace+"/"+name+" ready", func(ctx context.Context) (bool, string, error) {
		var err error
		vs, err = e.Snapshots.SnapshotV1().VolumeSnapshots(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		ready := vs.Status != nil && vs.Status.ReadyToUse != nil && *vs.Status.ReadyToUse && vs.Status.BoundVolumeSnapshotContentName != nil
		return ready, fmt.Sprintf("status %+v; events: %s", vs.Status, e.Events(ctx, namespace, name)), nil
	})
	content, err := e.Snapshots.SnapshotV1().VolumeSnapshotContents().Get(context.Background(), *vs.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get VolumeSnapshotContent of %s/%s: %v", namespace, name, err)
	}
	return vs, content
}

// WaitPVDeleted waits until the PersistentVolume no longer exists (reclaim
// policy Delete: the provisioner's DeleteVolume succeeded), failing t after
// timeout with its phase and events.
func (e *Env) WaitPVDeleted(t testing.TB, timeout time.Duration, name string) {
	t.Helper()
	WaitFor(t, timeout, "PV "+name+" deleted", func(ctx context.Context) (bool, string, error) {
		pv, err := e.Client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("phase %s; events: %s", pv.Status.Phase, e.Events(ctx, "", name)), nil
	})
}

// Events returns "reason: message" of every event on the named object in
// namespace ("" for cluster-scoped objects such as PVs, whose events the
// sidecars record in the default namespace), joined by " | "; or the
// error listing them.
func (e *Env) Events(ctx context.Context, namespace, name string) string {
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	evs, err := e.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", name).String()})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, ev := range evs.Items {
		out = append(out, ev.Reason+": "+ev.Message)
	}
	return strings.Join(out, " | ")
}

// FileSystemResizePending reports whether the claim waits for the node
// step of an expansion (kubelet's NodeExpandVolume): the controller step
// is done and the PV has grown, the claim's capacity not yet.
func FileSystemResizePending(c *corev1.PersistentVolumeClaim) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == corev1.PersistentVolumeClaimFileSystemResizePending && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// checkFieldCase fails when a key of doc (JSON) names a field of obj
// (decoded from doc) in another case than the API's spelling, which it finds in obj
// encoded again: a key that is missing there but matches one of its keys
// in another case.
func checkFieldCase(doc []byte, obj any) error {
	canonJSON, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var given, canon any
	if err := json.Unmarshal(doc, &given); err != nil {
		return err
	}
	if err := json.Unmarshal(canonJSON, &canon); err != nil {
		return err
	}
	if p, want := caseMismatch(given, canon, ""); p != "" {
		return fmt.Errorf("field %s: the API spells it %q", p, want)
	}
	return nil
}

// caseMismatch returns the path of the first key of given (in sorted order)
// that canon holds only in another case, and canon's spelling.
func caseMismatch(given, canon any, path string) (string, string) {
	switch g := given.(type) {
	case map[string]any:
		c, _ := canon.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(g)) {
			if cv, ok := c[k]; ok {
				if p, want := caseMismatch(g[k], cv, path+"."+k); p != "" {
					return p, want
				}
				continue
			}
			for ck := range c {
				if strings.EqualFold(ck, k) {
					return strings.TrimPrefix(path+"."+k, "."), ck
				}
			}
		}
	case []any:
		c, _ := canon.([]any)
		for i := range min(len(g), len(c)) {
			if p, want := caseMismatch(g[i], c[i], fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p, want
			}
		}
	}
	return "", ""
}

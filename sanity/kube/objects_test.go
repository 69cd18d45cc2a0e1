package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapfake "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned/fake"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/csikit/csikit/sanity/kube"
)

const manifest = `# a deploy/ file: comments, then documents
---
apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: ns1
stringData:
  user: REPLACE
---
# only a comment
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
provisioner: block.vendor.example
parameters:
  pool: REPLACE
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata:
  name: snaps
driver: block.vendor.example
deletionPolicy: Delete
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node
  namespace: ns1
spec:
  selector:
    matchLabels: {app: node}
  template:
    metadata:
      labels: {app: node}
    spec:
      containers:
      - name: driver
        image: REPLACE
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: controller
  namespace: ns1
spec:
  selector:
    matchLabels: {app: controller}
  template:
    metadata:
      labels: {app: controller}
    spec:
      containers:
      - name: provisioner
        image: registry.example/provisioner:v1
`

// Apply decodes each document into its typed object, lets edit change it,
// and creates it; unknown fields, unknown kinds and edit errors stop it.
func TestApply(t *testing.T) {
	ctx := context.Background()
	//lint:ignore SA1019 the snapshot client module generates no NewClientset
	snaps := snapfake.NewSimpleClientset()
	env := &kube.Env{Client: fake.NewClientset(), Snapshots: snaps}
	var kinds []string
	err := env.Apply(ctx, []byte(manifest), func(obj any) error {
		switch o := obj.(type) {
		case *corev1.Secret:
			kinds = append(kinds, "Secret")
			o.StringData["user"] = "tenant"
		case *storagev1.StorageClass:
			kinds = append(kinds, "StorageClass")
			o.Parameters["pool"] = "p1"
		case *snapv1.VolumeSnapshotClass:
			kinds = append(kinds, "VolumeSnapshotClass")
		case *appsv1.DaemonSet:
			kinds = append(kinds, "DaemonSet")
			o.Spec.Template.Spec.Containers[0].Image = "local/driver:test"
		case *appsv1.Deployment:
			kinds = append(kinds, "Deployment")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(kinds, ","), "Secret,StorageClass,VolumeSnapshotClass,DaemonSet,Deployment"; got != want {
		t.Errorf("edit saw %s, want %s", got, want)
	}
	ds, err := env.Client.AppsV1().DaemonSets("ns1").Get(ctx, "node", metav1.GetOptions{})
	if err != nil || ds.Spec.Template.Spec.Containers[0].Image != "local/driver:test" {
		t.Errorf("DaemonSet: got %v, %v; want the edited image", ds, err)
	}
	if _, err := env.Client.AppsV1().Deployments("ns1").Get(ctx, "controller", metav1.GetOptions{}); err != nil {
		t.Errorf("Deployment: %v", err)
	}
	sec, err := env.Client.CoreV1().Secrets("ns1").Get(ctx, "creds", metav1.GetOptions{})
	if err != nil || sec.StringData["user"] != "tenant" {
		t.Errorf("Secret: got %v, %v; want the edited user", sec, err)
	}
	sc, err := env.Client.StorageV1().StorageClasses().Get(ctx, "fast", metav1.GetOptions{})
	if err != nil || sc.Parameters["pool"] != "p1" || sc.Provisioner != "block.vendor.example" {
		t.Errorf("StorageClass: got %v, %v; want pool p1", sc, err)
	}
	if _, err := env.Snapshots.SnapshotV1().VolumeSnapshotClasses().Get(ctx, "snaps", metav1.GetOptions{}); err != nil {
		t.Errorf("VolumeSnapshotClass: %v", err)
	}

	for name, tc := range map[string]struct {
		doc  string
		edit func(any) error
		want string
	}{
		"unknown field": {"apiVersion: v1\nkind: Secret\nmetadata:\n  name: a\nstringDatum:\n  x: y\n", nil, `unknown field "stringDatum"`},
		"unknown kind":  {"apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: a\n", nil, "kind StatefulSet not supported"},
		"edit error":    {"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n", func(any) error { return errors.New("no") }, "no"},
		"exists":        {"apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\n  namespace: ns1\n", nil, "already exists"},
	} {
		err := env.Apply(ctx, []byte(tc.doc), tc.edit)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, tc.want)
		}
	}
}

// TestApplyFieldCase: a field name in another case than the API's is an
// error naming it (encoding/json, under the strict YAML decoder, would
// match it; the API server would drop it), and nothing is created.
func TestApplyFieldCase(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: ns1\nstringdata:\n  key: v\n", `field stringdata: the API spells it "stringData"`},
		{"apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: d\n  namespace: ns1\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      containers:\n      - name: c\n        image: i\n        imagePullpolicy: Never\n",
			`field spec.template.spec.containers[0].imagePullpolicy: the API spells it "imagePullPolicy"`},
	} {
		env := &kube.Env{Client: fake.NewClientset()}
		err := env.Apply(context.Background(), []byte(tc.doc), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Apply = %v; want an error containing %s", err, tc.want)
		}
		if s, _ := env.Client.CoreV1().Secrets("ns1").List(context.Background(), metav1.ListOptions{}); len(s.Items) != 0 {
			t.Errorf("a Secret was created: %v", s.Items)
		}
		if d, _ := env.Client.AppsV1().DaemonSets("ns1").List(context.Background(), metav1.ListOptions{}); len(d.Items) != 0 {
			t.Errorf("a DaemonSet was created: %v", d.Items)
		}
	}
	// User keys (labels, data) keep their case, whatever it is.
	env := &kube.Env{Client: fake.NewClientset()}
	doc := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: ns1\n  labels: {App: x}\nstringData:\n  UserKey: v\n"
	if err := env.Apply(context.Background(), []byte(doc), nil); err != nil {
		t.Fatalf("Apply of a Secret with upper-case user keys: %v", err)
	}
}

package csidriver_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/k8s/csidriver"
)

func ctrlCaps(ts ...csi.ControllerServiceCapability_RPC_Type) []*csi.ControllerServiceCapability {
	var out []*csi.ControllerServiceCapability
	for _, t := range ts {
		out = append(out, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return out
}

func nodeCaps(ts ...csi.NodeServiceCapability_RPC_Type) []*csi.NodeServiceCapability {
	var out []*csi.NodeServiceCapability
	for _, t := range ts {
		out = append(out, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return out
}

func b(v bool) *bool { return &v }

func TestFromCapabilities(t *testing.T) {
	const name = "block.vendor.example"
	for _, tc := range []struct {
		name string
		ctrl []*csi.ControllerServiceCapability
		node []*csi.NodeServiceCapability
		opts csidriver.Options
		want csidriver.Object
	}{
		{
			name: "node-only driver",
			want: csidriver.Object{Name: name, AttachRequired: b(false), PodInfoOnMount: b(false),
				VolumeLifecycleModes: []csidriver.LifecycleMode{csidriver.Persistent}, StorageCapacity: b(false),
				RequiresRepublish: b(false), SELinuxMount: b(false)},
		},
		{
			name: "attach and capacity from controller capabilities",
			ctrl: ctrlCaps(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME, csi.ControllerServiceCapability_RPC_GET_CAPACITY),
			want: csidriver.Object{Name: name, AttachRequired: b(true), PodInfoOnMount: b(false),
				VolumeLifecycleModes: []csidriver.LifecycleMode{csidriver.Persistent}, StorageCapacity: b(true),
				RequiresRepublish: b(false), SELinuxMount: b(false)},
		},
		{
			name: "capacity switched off by option",
			ctrl: ctrlCaps(csi.ControllerServiceCapability_RPC_GET_CAPACITY),
			opts: csidriver.Options{StorageCapacity: b(false)},
			want: csidriver.Object{Name: name, AttachRequired: b(false), PodInfoOnMount: b(false),
				VolumeLifecycleModes: []csidriver.LifecycleMode{csidriver.Persistent}, StorageCapacity: b(false),
				RequiresRepublish: b(false), SELinuxMount: b(false)},
		},
		{
			name: "both lifecycle modes force pod info",
			opts: csidriver.Options{LifecycleModes: []csidriver.LifecycleMode{csidriver.Persistent, csidriver.Ephemeral}},
			want: csidriver.Object{Name: name, AttachRequired: b(false), PodInfoOnMount: b(true),
				VolumeLifecycleModes: []csidriver.LifecycleMode{csidriver.Persistent, csidriver.Ephemeral}, StorageCapacity: b(false),
				RequiresRepublish: b(false), SELinuxMount: b(false)},
		},
		{
			name: "mount group capability defaults fsGroupPolicy to File",
			node: nodeCaps(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME, csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP),
			want: csidriver.Object{Name: name, AttachRequired: b(false), PodInfoOnMount: b(false),
				VolumeLifecycleModes: []csidriver.LifecycleMode{csidriver.Persistent}, StorageCapacity: b(false),
				FSGroupPolicy: csidriver.File, RequiresRepublish: b(false), SELinuxMount: b(false)},
		},
		{
			name: "explicit policy wins",
			node: nodeCaps(csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP),
			opts: csidriver.Options{FSGroupPolicy: csidriver.None},
			want: csidriver.Object{Name: name, AttachRequired: b(false), PodInfoOnMount: b(false),
				VolumeLifecycleModes: []csidriver.LifecycleMode{csidriver.Persistent}, StorageCapacity: b(false),
				FSGroupPolicy: csidriver.None, RequiresRepublish: b(false), SELinuxMount: b(false)},
		},
		{
			name: "every option",
			opts: csidriver.Options{
				PodInfoOnMount: true, LifecycleModes: []csidriver.LifecycleMode{csidriver.Ephemeral},
				TokenRequests:                []csidriver.TokenRequest{{Audience: "vault", ExpirationSeconds: 3600}, {Audience: ""}},
				ServiceAccountTokenInSecrets: true, RequiresRepublish: true, SELinuxMount: true,
				NodeAllocatableUpdatePeriod: time.Minute, Labels: map[string]string{"app.kubernetes.io/name": "block"},
			},
			want: csidriver.Object{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "block"},
				AttachRequired: b(false), PodInfoOnMount: b(true),
				VolumeLifecycleModes: []csidriver.LifecycleMode{csidriver.Ephemeral}, StorageCapacity: b(false),
				TokenRequests:     []csidriver.TokenRequest{{Audience: "vault", ExpirationSeconds: 3600}, {Audience: ""}},
				RequiresRepublish: b(true), SELinuxMount: b(true), NodeAllocatableUpdatePeriodSeconds: func() *int64 { v := int64(60); return &v }(),
				ServiceAccountTokenInSecrets: b(true)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := csidriver.FromCapabilities(name, tc.ctrl, tc.node, tc.opts)
			if err != nil {
				t.Fatalf("got %v, want nil", err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(tc.want)
				t.Errorf("got %s, want %s", gj, wj)
			}
		})
	}
}

func TestFromCapabilitiesRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		driver string
		opts   csidriver.Options
	}{
		"capacity without GET_CAPACITY": {"x.example", csidriver.Options{StorageCapacity: b(true)}},
		"bad driver name":               {"x_example", csidriver.Options{}},
		"empty driver name":             {"", csidriver.Options{}},
		"unknown lifecycle mode":        {"x.example", csidriver.Options{LifecycleModes: []csidriver.LifecycleMode{"Transient"}}},
		"duplicate lifecycle mode":      {"x.example", csidriver.Options{LifecycleModes: []csidriver.LifecycleMode{"Ephemeral", "Ephemeral"}}},
		"unknown fsGroupPolicy":         {"x.example", csidriver.Options{FSGroupPolicy: "Always"}},
		"duplicate audience":            {"x.example", csidriver.Options{TokenRequests: []csidriver.TokenRequest{{Audience: "a"}, {Audience: "a"}}}},
		"two empty audiences":           {"x.example", csidriver.Options{TokenRequests: []csidriver.TokenRequest{{}, {}}}},
		"token too short":               {"x.example", csidriver.Options{TokenRequests: []csidriver.TokenRequest{{Audience: "a", ExpirationSeconds: 599}}}},
		"token too long":                {"x.example", csidriver.Options{TokenRequests: []csidriver.TokenRequest{{Audience: "a", ExpirationSeconds: 1<<32 + 1}}}},
		"tokens in secrets w/o tokens":  {"x.example", csidriver.Options{ServiceAccountTokenInSecrets: true}},
		"update period too short":       {"x.example", csidriver.Options{NodeAllocatableUpdatePeriod: 5 * time.Second}},
		"update period fractional":      {"x.example", csidriver.Options{NodeAllocatableUpdatePeriod: 10500 * time.Millisecond}},
		"bad label key":                 {"x.example", csidriver.Options{Labels: map[string]string{"Bad_Prefix/x": "v"}}},
		"bad label value":               {"x.example", csidriver.Options{Labels: map[string]string{"a": "has space"}}},
	} {
		_, err := csidriver.FromCapabilities(tc.driver, nil, nil, tc.opts)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want InvalidArgument", name, err)
		}
	}
}

// golden was written by hand; its field names were checked one by one
// against k8s.io/api storage/v1 types.go (CSIDriver, CSIDriverSpec,
// TokenRequest json tags).
const golden = `apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: block.vendor.example
  labels:
    app.kubernetes.io/name: block
    app.kubernetes.io/part-of: "true"
spec:
  attachRequired: true
  podInfoOnMount: true
  volumeLifecycleModes:
    - Persistent
    - Ephemeral
  storageCapacity: true
  fsGroupPolicy: File
  tokenRequests:
    - audience: vault
      expirationSeconds: 3600
    - audience: "https://sts.example:443"
    - audience: ""
  requiresRepublish: true
  seLinuxMount: false
  nodeAllocatableUpdatePeriodSeconds: 60
  serviceAccountTokenInSecrets: true
`

func fullObject(t *testing.T) *csidriver.Object {
	t.Helper()
	o, err := csidriver.FromCapabilities("block.vendor.example",
		ctrlCaps(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME, csi.ControllerServiceCapability_RPC_GET_CAPACITY),
		nodeCaps(csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP),
		csidriver.Options{
			LifecycleModes: []csidriver.LifecycleMode{csidriver.Persistent, csidriver.Ephemeral},
			TokenRequests: []csidriver.TokenRequest{
				{Audience: "vault", ExpirationSeconds: 3600}, {Audience: "https://sts.example:443"}, {Audience: ""},
			},
			ServiceAccountTokenInSecrets: true,
			RequiresRepublish:            true,
			NodeAllocatableUpdatePeriod:  time.Minute,
			Labels:                       map[string]string{"app.kubernetes.io/part-of": "true", "app.kubernetes.io/name": "block"},
		})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestYAMLGolden(t *testing.T) {
	got, err := fullObject(t).YAML()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != golden {
		t.Errorf("got\n%s\nwant\n%s", got, golden)
	}
}

// storage.k8s.io/v1 field names, from k8s.io/api storage/v1 types.go.
var (
	specFields = []string{
		"attachRequired", "podInfoOnMount", "volumeLifecycleModes", "storageCapacity",
		"fsGroupPolicy", "tokenRequests", "requiresRepublish", "seLinuxMount",
		"nodeAllocatableUpdatePeriodSeconds", "serviceAccountTokenInSecrets",
	}
	tokenRequestFields = []string{"audience", "expirationSeconds"}
)

func TestYAMLMatchesAPIFieldsAndJSON(t *testing.T) {
	o := fullObject(t)
	y, err := o.YAML()
	if err != nil {
		t.Fatal(err)
	}
	fromYAML, err := parseYAML(string(y))
	if err != nil {
		t.Fatalf("parse YAML: %v\n%s", err, y)
	}
	j, err := o.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON any
	if err := json.Unmarshal(j, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromYAML, fromJSON) {
		t.Errorf("YAML and JSON disagree:\nYAML %v\nJSON %v", fromYAML, fromJSON)
	}

	doc := fromYAML.(map[string]any)
	if doc["apiVersion"] != "storage.k8s.io/v1" || doc["kind"] != "CSIDriver" {
		t.Errorf("got apiVersion %v kind %v, want storage.k8s.io/v1 CSIDriver", doc["apiVersion"], doc["kind"])
	}
	if got := slices.Sorted(maps.Keys(doc)); !slices.Equal(got, []string{"apiVersion", "kind", "metadata", "spec"}) {
		t.Errorf("top-level keys: got %v, want apiVersion kind metadata spec", got)
	}
	spec := doc["spec"].(map[string]any)
	if got, want := slices.Sorted(maps.Keys(spec)), slices.Sorted(slices.Values(specFields)); !slices.Equal(got, want) {
		t.Errorf("spec keys: got %v, want every CSIDriverSpec field %v", got, want)
	}
	for _, tr := range spec["tokenRequests"].([]any) {
		for k := range tr.(map[string]any) {
			if !slices.Contains(tokenRequestFields, k) {
				t.Errorf("tokenRequests key %q: want one of %v", k, tokenRequestFields)
			}
		}
	}
	if spec["attachRequired"] != true || spec["seLinuxMount"] != false || spec["nodeAllocatableUpdatePeriodSeconds"] != 60.0 {
		t.Errorf("typed values: got %v %v %v, want true false 60", spec["attachRequired"], spec["seLinuxMount"], spec["nodeAllocatableUpdatePeriodSeconds"])
	}
	labels := doc["metadata"].(map[string]any)["labels"].(map[string]any)
	if labels["app.kubernetes.io/part-of"] != "true" {
		t.Errorf("label value \"true\": got %#v, want the string (quoted in YAML)", labels["app.kubernetes.io/part-of"])
	}
}

func TestYAMLMinimal(t *testing.T) {
	o := &csidriver.Object{Name: "x.example"}
	y, err := o.YAML()
	if err != nil {
		t.Fatal(err)
	}
	want := "apiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata:\n  name: x.example\nspec: {}\n"
	if string(y) != want {
		t.Errorf("got %q, want %q", y, want)
	}
	doc, err := parseYAML(string(y))
	if err != nil {
		t.Fatal(err)
	}
	j, _ := o.JSON()
	var fromJSON any
	if err := json.Unmarshal(j, &fromJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(doc, fromJSON) {
		t.Errorf("minimal object: YAML %v and JSON %v disagree", doc, fromJSON)
	}
	if _, err := (&csidriver.Object{Name: "bad name"}).YAML(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("invalid object: got %v, want InvalidArgument", err)
	}
	if _, err := (&csidriver.Object{Name: "bad name"}).JSON(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("invalid object JSON: got %v, want InvalidArgument", err)
	}
}

func TestYAMLQuotesAmbiguousScalars(t *testing.T) {
	for _, v := range []string{"true", "No", "1.0", "0x1F", "null", "", "-a", "a: b", "a #b", "ümlaut", `"q"`, "~"} {
		o := &csidriver.Object{Name: "x.example", TokenRequests: []csidriver.TokenRequest{{Audience: v}}}
		y, err := o.YAML()
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		doc, err := parseYAML(string(y))
		if err != nil {
			t.Fatalf("%q: parse: %v\n%s", v, err, y)
		}
		got := doc.(map[string]any)["spec"].(map[string]any)["tokenRequests"].([]any)[0].(map[string]any)["audience"]
		if got != v {
			t.Errorf("audience %q: got %#v back, want the same string", v, got)
		}
		if !strings.Contains(string(y), "audience: \"") {
			t.Errorf("audience %q: got %s, want it double-quoted", v, y)
		}
	}
}

func BenchmarkYAML(b *testing.B) {
	o, err := csidriver.FromCapabilities("block.vendor.example",
		ctrlCaps(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME), nil,
		csidriver.Options{Labels: map[string]string{"app": "block"}, TokenRequests: []csidriver.TokenRequest{{Audience: "vault"}}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := o.YAML(); err != nil {
			b.Fatal(err)
		}
	}
}

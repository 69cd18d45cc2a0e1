package keys_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/k8s/keys"
)

// The literal strings below were checked against the Kubernetes sources that
// write them: external-provisioner pkg/controller/controller.go,
// external-snapshotter pkg/utils/util.go, kubelet pkg/volume/csi and
// k8s.io/api storage/v1 CSIDriverSpec docs. A typo in a constant must fail
// here, not in a cluster.
func TestKeysMatchKubernetes(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{keys.PVCName, "csi.storage.k8s.io/pvc/name"},
		{keys.PVCNamespace, "csi.storage.k8s.io/pvc/namespace"},
		{keys.PVName, "csi.storage.k8s.io/pv/name"},
		{keys.VolumeSnapshotName, "csi.storage.k8s.io/volumesnapshot/name"},
		{keys.VolumeSnapshotNamespace, "csi.storage.k8s.io/volumesnapshot/namespace"},
		{keys.VolumeSnapshotContentName, "csi.storage.k8s.io/volumesnapshotcontent/name"},
		{keys.PodName, "csi.storage.k8s.io/pod.name"},
		{keys.PodNamespace, "csi.storage.k8s.io/pod.namespace"},
		{keys.PodUID, "csi.storage.k8s.io/pod.uid"},
		{keys.ServiceAccountName, "csi.storage.k8s.io/serviceAccount.name"},
		{keys.Ephemeral, "csi.storage.k8s.io/ephemeral"},
		{keys.ServiceAccountTokens, "csi.storage.k8s.io/serviceAccount.tokens"},
		{keys.FSType, "csi.storage.k8s.io/fstype"},
		{keys.ProvisionerSecretName, "csi.storage.k8s.io/provisioner-secret-name"},
		{keys.ProvisionerSecretNamespace, "csi.storage.k8s.io/provisioner-secret-namespace"},
		{keys.ControllerPublishSecretName, "csi.storage.k8s.io/controller-publish-secret-name"},
		{keys.NodeStageSecretNamespace, "csi.storage.k8s.io/node-stage-secret-namespace"},
		{keys.NodePublishSecretName, "csi.storage.k8s.io/node-publish-secret-name"},
		{keys.ControllerExpandSecretName, "csi.storage.k8s.io/controller-expand-secret-name"},
		{keys.NodeExpandSecretNamespace, "csi.storage.k8s.io/node-expand-secret-namespace"},
		{keys.SnapshotterListSecretName, "csi.storage.k8s.io/snapshotter-list-secret-name"},
		{keys.GroupSnapshotterSecretName, "csi.storage.k8s.io/group-snapshotter-secret-name"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestStripReserved(t *testing.T) {
	in := map[string]string{
		"pool":                   "fast",
		"csi.storage.k8s.io.x":   "not the prefix: kept",
		keys.PVCName:             "data",
		keys.PVCNamespace:        "default",
		keys.PVName:              "pvc-123",
		"vendor.example/replica": "3",
	}
	before := maps.Clone(in)
	got := keys.StripReserved(in)
	want := map[string]string{"pool": "fast", "csi.storage.k8s.io.x": "not the prefix: kept", "vendor.example/replica": "3"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if !maps.Equal(in, before) {
		t.Errorf("input modified: got %v, want %v", in, before)
	}
	got["pool"] = "changed"
	if in["pool"] != "fast" {
		t.Errorf("result aliases input: got %q, want %q", in["pool"], "fast")
	}
	if got := keys.StripReserved(nil); got != nil {
		t.Errorf("StripReserved(nil): got %v, want nil", got)
	}
	if got := keys.StripReserved(map[string]string{keys.PVName: "x"}); got == nil || len(got) != 0 {
		t.Errorf("all reserved: got %#v, want empty non-nil map", got)
	}
}

func TestPVCAndSnapshot(t *testing.T) {
	md, ok := keys.PVC(map[string]string{keys.PVCName: "data", keys.PVCNamespace: "ns", keys.PVName: "pvc-1", "pool": "x"})
	if want := (keys.PVCMetadata{Name: "data", Namespace: "ns", PVName: "pvc-1"}); !ok || md != want {
		t.Errorf("PVC: got %+v, %v, want %+v, true", md, ok, want)
	}
	if _, ok := keys.PVC(map[string]string{"pool": "x"}); ok {
		t.Errorf("PVC without metadata: got ok, want !ok")
	}
	if _, ok := keys.PVC(nil); ok {
		t.Errorf("PVC(nil): got ok, want !ok")
	}
	s, ok := keys.Snapshot(map[string]string{keys.VolumeSnapshotName: "s", keys.VolumeSnapshotNamespace: "ns", keys.VolumeSnapshotContentName: "c"})
	if want := (keys.SnapshotMetadata{Name: "s", Namespace: "ns", ContentName: "c"}); !ok || s != want {
		t.Errorf("Snapshot: got %+v, %v, want %+v, true", s, ok, want)
	}
	if _, ok := keys.Snapshot(map[string]string{}); ok {
		t.Errorf("Snapshot without metadata: got ok, want !ok")
	}
}

func TestPod(t *testing.T) {
	vc := map[string]string{
		keys.PodName: "web-0", keys.PodNamespace: "shop", keys.PodUID: "6f1c",
		keys.ServiceAccountName: "web", keys.Ephemeral: "true", "pool": "x",
	}
	info, ok := keys.Pod(vc)
	want := keys.PodInfo{Name: "web-0", Namespace: "shop", UID: "6f1c", ServiceAccountName: "web", Ephemeral: true}
	if !ok || info != want {
		t.Errorf("got %+v, %v, want %+v, true", info, ok, want)
	}
	if !keys.IsEphemeral(vc) {
		t.Errorf("IsEphemeral: got false, want true")
	}
	vc[keys.Ephemeral] = "false"
	if info, _ := keys.Pod(vc); info.Ephemeral || keys.IsEphemeral(vc) {
		t.Errorf("ephemeral=false: got ephemeral, want not")
	}
	if _, ok := keys.Pod(map[string]string{"pool": "x"}); ok {
		t.Errorf("no pod info: got ok, want !ok")
	}
}

const tokenJSON = `{"vault":{"token":"s3cr3t-vault","expirationTimestamp":"2026-12-02T18:00:00Z"},"":{"token":"s3cr3t-api","expirationTimestamp":"2026-12-02T19:00:00Z"}}`

func TestTokens(t *testing.T) {
	toks, err := keys.Tokens(map[string]string{keys.ServiceAccountTokens: tokenJSON}, nil)
	if err != nil {
		t.Fatalf("Tokens: got %v, want nil", err)
	}
	want := map[string]keys.ServiceAccountToken{
		"vault": {Value: "s3cr3t-vault", Expiration: time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)},
		"":      {Value: "s3cr3t-api", Expiration: time.Date(2026, 12, 2, 19, 0, 0, 0, time.UTC)},
	}
	if len(toks) != len(want) {
		t.Fatalf("got %d tokens, want %d", len(toks), len(want))
	}
	for aud, w := range want {
		g := toks[aud]
		if g.Value != w.Value || !g.Expiration.Equal(w.Expiration) {
			t.Errorf("audience %q: got %q %v, want %q %v", aud, g.Value, g.Expiration, w.Value, w.Expiration)
		}
	}

	// Secrets win over the volume context (serviceAccountTokenInSecrets).
	fromSecrets := `{"vault":{"token":"from-secrets","expirationTimestamp":"2026-12-02T18:00:00Z"}}`
	toks, err = keys.Tokens(map[string]string{keys.ServiceAccountTokens: tokenJSON}, map[string]string{keys.ServiceAccountTokens: fromSecrets})
	if err != nil || len(toks) != 1 || toks["vault"].Value != "from-secrets" {
		t.Errorf("secrets first: got %v, %v, want one token from secrets", toks, err)
	}

	toks, err = keys.Tokens(nil, nil)
	if err != nil || toks == nil || len(toks) != 0 {
		t.Errorf("no tokens: got %v, %v, want empty map, nil", toks, err)
	}
}

func TestTokensMalformedNeverQuotesInput(t *testing.T) {
	for _, raw := range []string{`{"vault":{"token":"s3cr3t-x"`, `s3cr3t-x`, `{"vault":"s3cr3t-x"}`} {
		_, err := keys.Tokens(map[string]string{keys.ServiceAccountTokens: raw}, nil)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%d bytes: got code %v, want InvalidArgument", len(raw), status.Code(err))
		}
		if err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("error quotes the token: %v", err)
		}
	}
}

func TestTokenRedacted(t *testing.T) {
	tok := keys.ServiceAccountToken{Value: "s3cr3t-value", Expiration: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(verb, tok); strings.Contains(s, "s3cr3t") {
			t.Errorf("fmt %s: got %q, want the value redacted", verb, s)
		}
	}
	m := map[string]keys.ServiceAccountToken{"aud": tok}
	if s := fmt.Sprintf("%v", m); strings.Contains(s, "s3cr3t") {
		t.Errorf("fmt map: got %q, want the value redacted", s)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("publish", "token", tok)
	if strings.Contains(buf.String(), "s3cr3t") || !strings.Contains(buf.String(), "2026-01-02T03:04:05Z") {
		t.Errorf("slog: got %s, want the value redacted and the expiration kept", buf.String())
	}
}

func TestSecretRefs(t *testing.T) {
	refs := keys.SecretRefs()
	if len(refs) != 10 {
		t.Fatalf("got %d secret refs, want 10", len(refs))
	}
	seen := map[string]bool{}
	for _, r := range refs {
		for _, k := range []string{r.NameKey, r.NamespaceKey} {
			if !keys.IsReserved(k) || !keys.IsSecretRef(k) || seen[k] {
				t.Errorf("key %q: reserved %v, secret ref %v, duplicate %v; want reserved, secret ref, unique", k, keys.IsReserved(k), keys.IsSecretRef(k), seen[k])
			}
			seen[k] = true
		}
		if strings.TrimSuffix(r.NameKey, "-name") != strings.TrimSuffix(r.NamespaceKey, "-namespace") {
			t.Errorf("pair %q/%q: got mismatched names, want the same Secret", r.NameKey, r.NamespaceKey)
		}
	}
	refs[0].NameKey = "mutated"
	if keys.SecretRefs()[0].NameKey == "mutated" {
		t.Errorf("SecretRefs shares its slice: got mutation visible, want a fresh slice")
	}
	for _, k := range []string{keys.PVCName, keys.FSType, "pool"} {
		if keys.IsSecretRef(k) {
			t.Errorf("IsSecretRef(%q): got true, want false", k)
		}
	}
}

func BenchmarkStripReserved(b *testing.B) {
	params := map[string]string{
		"pool": "fast", "fsOptions": "noatime", "replicas": "3", "encrypted": "true",
		keys.PVCName: "data", keys.PVCNamespace: "default", keys.PVName: "pvc-0f3e",
	}
	b.ReportAllocs()
	for b.Loop() {
		sink = keys.StripReserved(params)
	}
}

// sink keeps the benchmarked result alive so the map is really allocated.
var sink map[string]string

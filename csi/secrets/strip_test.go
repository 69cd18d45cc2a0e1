package secrets_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/secrets"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// specMessages returns a new instance of every message of the CSI spec.
func specMessages(t testing.TB) []proto.Message {
	t.Helper()
	var out []proto.Message
	var walk func(protoreflect.MessageDescriptors)
	walk = func(mds protoreflect.MessageDescriptors) {
		for i := range mds.Len() {
			md := mds.Get(i)
			if md.IsMapEntry() {
				continue
			}
			mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			if err != nil {
				t.Fatalf("%s: %v", md.FullName(), err)
			}
			out = append(out, mt.New().Interface())
			walk(md.Messages())
		}
	}
	walk(csi.File_csi_proto.Messages())
	return out
}

// fill sets every top-level string and map<string,string> field of m: the
// secret ones to values containing "SECRET", the others to "visible".
func fill(m proto.Message) (secretFields int) {
	rm := m.ProtoReflect()
	fields := rm.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap() && fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.StringKind:
			v := "visible"
			if secrets.IsSecret(fd) {
				v = "SECRET-" + string(fd.FullName())
				secretFields++
			}
			rm.Mutable(fd).Map().Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfString(v))
		case !fd.IsList() && !fd.IsMap() && fd.Kind() == protoreflect.StringKind && fd.ContainingOneof() == nil:
			rm.Set(fd, protoreflect.ValueOfString("visible"))
		}
	}
	return secretFields
}

func TestStripEverySpecMessage(t *testing.T) {
	total := 0
	for _, m := range specMessages(t) {
		n := fill(m)
		total += n
		before := proto.Clone(m)
		got := secrets.Strip(m)
		if !proto.Equal(m, before) {
			t.Errorf("%T: Strip modified its argument", m)
		}
		out := secrets.Format(m)
		if strings.Contains(out, "SECRET") {
			t.Errorf("%T: Format(m) = %s; contains a secret value", m, out)
		}
		if n == 0 {
			if got != m {
				t.Errorf("%T has no secrets: Strip returned a copy, want m itself", m)
			}
			continue
		}
		if !strings.Contains(out, `"k":"`+secrets.Marker+`"`) {
			t.Errorf("%T: Format(m) = %s; want the key kept and its value %s", m, out, secrets.Marker)
		}
		if !strings.Contains(out, "visible") && hasVisible(m) {
			t.Errorf("%T: Format(m) = %s; lost non-secret fields", m, out)
		}
	}
	// v1.14.0 marks 22 fields csi_secret, all of them secrets maps.
	if total != 22 {
		t.Errorf("secret fields found in the spec: got %d, want 22", total)
	}
}

func hasVisible(m proto.Message) bool {
	return strings.Contains(fmt.Sprint(m), "visible")
}

func TestStripKnownRequests(t *testing.T) {
	for _, m := range []proto.Message{
		&csi.CreateVolumeRequest{Name: "pvc-1", Secrets: map[string]string{"password": "hunter2"},
			VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
				Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "snap-1"}}}},
		&csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging", Secrets: map[string]string{"key": "hunter2"}},
		&csi.NodePublishVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"key": "hunter2"}},
		&csi.ListSnapshotsRequest{SourceVolumeId: "vol-1", Secrets: map[string]string{"key": "hunter2"}},
		&csi.ControllerModifyVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"key": "hunter2"},
			MutableParameters: map[string]string{"iops": "3000"}},
		&csi.CreateVolumeGroupSnapshotRequest{Name: "g", Secrets: map[string]string{"key": "hunter2"}},
	} {
		out := secrets.Format(m)
		if strings.Contains(out, "hunter2") {
			t.Errorf("%T: Format = %s; contains the secret", m, out)
		}
		if !strings.Contains(out, secrets.Marker) {
			t.Errorf("%T: Format = %s; want %s", m, out, secrets.Marker)
		}
		if !strings.Contains(out, "vol-1") && !strings.Contains(out, `"name"`) {
			t.Errorf("%T: Format = %s; lost the non-secret fields", m, out)
		}
	}
}

func TestStripNestedRepeatedMapsAndResponses(t *testing.T) {
	m := newFuture(t)
	before := proto.Clone(m)
	got := secrets.Strip(m)
	if !proto.Equal(m, before) {
		t.Fatal("Strip modified its argument")
	}
	if got == m {
		t.Fatal("Strip returned m itself for a message full of secrets")
	}
	out := secrets.Format(m)
	if strings.Contains(out, "SECRET") || strings.Contains(out, "424242") {
		t.Fatalf("Format = %s; contains a secret value", out)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("Format output is not JSON: %v\n%s", err, out)
	}
	for _, want := range []string{
		`"plain":"plain"`,                                 // non-secret kept
		`"labels":{"zone":"eu-1"}`,                        // non-secret map kept
		`"name":"name-inner"`,                             // nested non-secret kept
		`"name":"name-item1"`,                             // repeated non-secret kept
		`"name":"name-mapped"`,                            // map-of-message non-secret kept
		`"token":"` + secrets.Marker + `"`,                // nested scalar secret
		`"secrets":{"password":"` + secrets.Marker + `"}`, // nested secrets map
		`"tokens":["` + secrets.Marker + `"]`,             // repeated secret
		`"secret_inner":{}`,                               // secret message emptied
		`"secrets":{"user":"` + secrets.Marker + `"}`,     // map named secrets without the option
		`"key":"` + b64(secrets.Marker) + `"`,             // bytes secret
		`"blobs":{"cert":"` + b64(secrets.Marker) + `"}`,  // map of bytes secret
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Format = %s\nwant it to contain %s", out, want)
		}
	}
	if strings.Contains(out, `"pin"`) {
		t.Errorf("Format = %s; want the secret int64 cleared", out)
	}
}

func b64(s string) string {
	b, _ := json.Marshal([]byte(s))
	return strings.Trim(string(b), `"`)
}

func TestStripDropsUnknownFields(t *testing.T) {
	// A newer CO may send a secret field this binary does not know.
	req := &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/staging"}
	inner := &csi.VolumeCapability{}
	var unknown []byte
	unknown = protowire.AppendTag(unknown, 999, protowire.BytesType)
	unknown = protowire.AppendString(unknown, "SECRET-from-the-future")
	inner.ProtoReflect().SetUnknown(unknown)
	req.ProtoReflect().SetUnknown(unknown)
	stage := &csi.NodeStageVolumeRequest{VolumeId: "vol-1", VolumeCapability: inner}

	for _, m := range []proto.Message{req, stage} {
		got := secrets.Strip(m)
		if got == m {
			t.Errorf("%T with unknown fields: Strip returned m itself, want a copy", m)
		}
		if s := fmt.Sprint(got); strings.Contains(s, "SECRET") {
			t.Errorf("%T: stripped copy prints %s; contains the unknown field", m, s)
		}
		if !strings.Contains(fmt.Sprint(m), "SECRET") {
			t.Errorf("%T: Strip removed unknown fields from its argument", m)
		}
	}
}

func TestStripNilAndEmpty(t *testing.T) {
	if got := secrets.Strip(nil); got != nil {
		t.Errorf("Strip(nil) = %v, want nil", got)
	}
	var typedNil *csi.CreateVolumeRequest
	if got := secrets.Strip(typedNil); got != proto.Message(typedNil) {
		t.Errorf("Strip(typed nil) = %v, want it back", got)
	}
	if got := secrets.Format(nil); got != "null" {
		t.Errorf("Format(nil) = %q, want null", got)
	}
	if got := secrets.Format(typedNil); got != "null" {
		t.Errorf("Format(typed nil) = %q, want null", got)
	}
	if got := secrets.Format(&csi.ProbeRequest{}); got != "{}" {
		t.Errorf("Format(empty) = %q, want {}", got)
	}
	// An empty secrets map is not populated: nothing to strip.
	m := &csi.DeleteVolumeRequest{VolumeId: "v", Secrets: map[string]string{}}
	if got := secrets.Strip(m); got != m {
		t.Error("Strip of an empty secrets map returned a copy, want m itself")
	}
}

func TestLogValueHandlers(t *testing.T) {
	req := &csi.NodeStageVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"password": "hunter2"}}
	for name, newHandler := range map[string]func(*bytes.Buffer) slog.Handler{
		"json": func(b *bytes.Buffer) slog.Handler {
			return slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})
		},
		"text": func(b *bytes.Buffer) slog.Handler {
			return slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})
		},
	} {
		var buf bytes.Buffer
		logger := slog.New(newHandler(&buf))
		logger.Debug("call", "request", secrets.LogValue(req))
		logger.With("request", secrets.LogValue(req)).Debug("with")
		logger.Debug("group", slog.Group("g", "request", secrets.LogValue(req)))
		out := buf.String()
		if strings.Contains(out, "hunter2") {
			t.Errorf("%s handler output contains the secret:\n%s", name, out)
		}
		if strings.Count(out, secrets.Marker) != 3 || strings.Count(out, "vol-1") != 3 {
			t.Errorf("%s handler output: want 3 lines each with vol-1 and %s, got:\n%s", name, secrets.Marker, out)
		}
	}
	// JSON embeds the message as an object, not a string.
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("call", "request", secrets.LogValue(req))
	var line struct{ Request map[string]any }
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line.Request["volume_id"] != "vol-1" {
		t.Errorf("JSON handler: request = %v (%v), want an object with volume_id vol-1; line %s", line.Request, err, buf.String())
	}
	if s := fmt.Sprint(secrets.LogValue(req)); strings.Contains(s, "hunter2") || !strings.Contains(s, "vol-1") {
		t.Errorf("fmt.Sprint(LogValue) = %s", s)
	}
	lm, ok := secrets.LogValue(req).(interface{ MarshalLog() any })
	if !ok {
		t.Fatal("LogValue result does not implement logr.Marshaler")
	}
	if s := fmt.Sprint(lm.MarshalLog()); strings.Contains(s, "hunter2") {
		t.Errorf("MarshalLog = %s; contains the secret", s)
	}
}

func FuzzStrip(f *testing.F) {
	seed, _ := proto.Marshal(&csi.CreateVolumeRequest{Name: "n", Secrets: map[string]string{"a": "SECRET"},
		Parameters: map[string]string{"p": "v"}})
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		m := &csi.CreateVolumeRequest{}
		if proto.Unmarshal(b, m) != nil {
			return
		}
		for _, v := range m.GetSecrets() {
			if len(v) < 4 {
				continue
			}
			if out := secrets.Format(m); strings.Contains(out, v) && !strings.Contains(secrets.Marker, v) &&
				!otherFieldHas(m, v) {
				t.Fatalf("Format = %s; contains secret value %q", out, v)
			}
		}
	})
}

// otherFieldHas reports whether a non-secret part of m contains v, in which
// case seeing v in the output is not a leak.
func otherFieldHas(m *csi.CreateVolumeRequest, v string) bool {
	c := proto.Clone(m).(*csi.CreateVolumeRequest)
	c.Secrets = nil
	for k := range m.GetSecrets() {
		if strings.Contains(k, v) {
			return true
		}
	}
	return strings.Contains(secrets.Format(c), v) || strings.Contains(secrets.Marker, v)
}

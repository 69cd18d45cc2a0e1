package secrets

import (
	"bytes"
	"encoding/json"
	"log/slog"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

var jsonOptions = protojson.MarshalOptions{UseProtoNames: true}

// Format returns m, stripped, as compact single-line JSON with the proto
// field names (e.g. {"volume_id":"v1","secrets":{"key":"***stripped***"}}).
// A nil message formats as "null".
func Format(m proto.Message) string {
	return string(formatJSON(Strip(m)))
}

// formatJSON renders an already stripped message. protojson randomizes
// whitespace on purpose; compacting makes the output stable.
func formatJSON(m proto.Message) []byte {
	if m == nil || !m.ProtoReflect().IsValid() {
		return []byte("null")
	}
	b, err := jsonOptions.Marshal(m)
	if err != nil {
		// Only invalid UTF-8 in a string field gets here. Say so rather
		// than fall back to a format that might print unstripped bytes.
		msg, _ := json.Marshal("unprintable " + string(m.ProtoReflect().Descriptor().FullName()) + ": " + err.Error())
		return msg
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// LogValue returns a value to log m with: nothing is copied, stripped or
// formatted until a log handler resolves it, which slog does only for records
// it is going to write. The resolved value is the stripped message, which a
// slog.JSONHandler embeds as a JSON object and a slog.TextHandler writes as
// quoted compact JSON. It also works with fmt (String) and logr/klog
// (MarshalLog).
func LogValue(m proto.Message) slog.LogValuer { return logValue{m} }

type logValue struct{ m proto.Message }

// LogValue implements slog.LogValuer.
func (v logValue) LogValue() slog.Value { return slog.AnyValue(stripped{Strip(v.m)}) }

// String implements fmt.Stringer: the stripped message as Format writes it.
func (v logValue) String() string { return Format(v.m) }

// MarshalLog implements logr.Marshaler without importing logr.
func (v logValue) MarshalLog() any { return Format(v.m) }

// stripped is a message that has been through Strip.
type stripped struct{ m proto.Message }

// MarshalJSON implements json.Marshaler for slog.JSONHandler.
func (s stripped) MarshalJSON() ([]byte, error) { return formatJSON(s.m), nil }

// MarshalText implements encoding.TextMarshaler for slog.TextHandler.
func (s stripped) MarshalText() ([]byte, error) { return formatJSON(s.m), nil }

// String implements fmt.Stringer.
func (s stripped) String() string { return string(formatJSON(s.m)) }

package secrets

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Redact returns s with every occurrence of a secret value held by any of
// msgs replaced by Marker. It is meant for text a driver built from a request
// (an error message, a panic value) before that text is logged: Strip
// protects the message, Redact protects what was derived from it. Secret
// values are matched as exact substrings, longest first; empty values are
// ignored, nil messages skipped. When msgs hold no secret, s is returned
// unchanged.
func Redact(s string, msgs ...proto.Message) string {
	if s == "" {
		return s
	}
	var vals []string
	for _, m := range msgs {
		if m != nil && m.ProtoReflect().IsValid() {
			collect(m.ProtoReflect(), false, &vals)
		}
	}
	// Longest first, so that with secrets "hunter" and "hunter2" no "2"
	// is left behind.
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	for _, v := range vals {
		if v != "" && strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, Marker)
		}
	}
	return s
}

// collect appends to out every string and bytes value of m that is secret:
// held by a secret field, or anywhere inside a message that is (all).
func collect(m protoreflect.Message, all bool, out *[]string) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		secret := all || IsSecret(fd)
		one := func(v protoreflect.Value, kind protoreflect.Kind) {
			switch kind {
			case protoreflect.StringKind:
				if secret {
					*out = append(*out, v.String())
				}
			case protoreflect.BytesKind:
				if secret {
					*out = append(*out, string(v.Bytes()))
				}
			case protoreflect.MessageKind, protoreflect.GroupKind:
				collect(v.Message(), secret, out)
			}
		}
		switch {
		case fd.IsMap():
			kind := fd.MapValue().Kind()
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				one(mv, kind)
				return true
			})
		case fd.IsList():
			for i := range v.List().Len() {
				one(v.List().Get(i), fd.Kind())
			}
		default:
			one(v, fd.Kind())
		}
		return true
	})
}

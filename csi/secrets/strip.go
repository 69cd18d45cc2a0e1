package secrets

import (
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Marker replaces every secret string value in a stripped message.
const Marker = "***stripped***"

// secretCache maps protoreflect.FieldDescriptor to bool. Descriptors are
// immutable, so caching the answer is safe for the life of the process.
var secretCache sync.Map

// IsSecret reports whether fd holds a secret: it carries the csi_secret
// option set to true, or it is a map<string, string> named "secrets".
func IsSecret(fd protoreflect.FieldDescriptor) bool {
	if v, ok := secretCache.Load(fd); ok {
		return v.(bool)
	}
	secret := isSecret(fd)
	secretCache.Store(fd, secret)
	return secret
}

func isSecret(fd protoreflect.FieldDescriptor) bool {
	if opts, ok := fd.Options().(*descriptorpb.FieldOptions); ok && opts != nil &&
		proto.HasExtension(opts, csi.E_CsiSecret) {
		if b, ok := proto.GetExtension(opts, csi.E_CsiSecret).(bool); ok && b {
			return true
		}
	}
	return fd.IsMap() && fd.Name() == "secrets" &&
		fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.StringKind
}

// Strip returns m with every secret value replaced (see the package
// documentation). It returns m itself when m holds no secret and no unknown
// field, so callers must treat the result as read-only. A nil or invalid
// message is returned as is.
func Strip(m proto.Message) proto.Message {
	if m == nil {
		return nil
	}
	rm := m.ProtoReflect()
	if !rm.IsValid() || !needsStrip(rm) {
		return m
	}
	c := proto.Clone(m)
	strip(c.ProtoReflect())
	return c
}

// needsStrip reports whether m holds, at any depth, a populated secret field
// or unknown fields.
func needsStrip(m protoreflect.Message) bool {
	if len(m.GetUnknown()) > 0 {
		return true
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		found = IsSecret(fd) || anyMessage(fd, v, needsStrip)
		return !found
	})
	return found
}

// strip removes secrets and unknown fields from m in place.
func strip(m protoreflect.Message) {
	if len(m.GetUnknown()) > 0 {
		m.SetUnknown(nil)
	}
	var secret []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if IsSecret(fd) {
			secret = append(secret, fd)
			return true
		}
		anyMessage(fd, v, func(sub protoreflect.Message) bool { strip(sub); return false })
		return true
	})
	for _, fd := range secret {
		redact(m, fd)
	}
}

// anyMessage calls f on each message held by field fd with value v (the
// message itself, list elements or map values) until f returns true, and
// reports whether it did.
func anyMessage(fd protoreflect.FieldDescriptor, v protoreflect.Value, f func(protoreflect.Message) bool) bool {
	switch {
	case fd.IsMap():
		if fd.MapValue().Message() == nil {
			return false
		}
		found := false
		v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
			found = f(mv.Message())
			return !found
		})
		return found
	case fd.IsList():
		if fd.Message() == nil {
			return false
		}
		l := v.List()
		for i := range l.Len() {
			if f(l.Get(i).Message()) {
				return true
			}
		}
		return false
	case fd.Message() != nil:
		return f(v.Message())
	}
	return false
}

// redact replaces the value of the secret field fd of m.
func redact(m protoreflect.Message, fd protoreflect.FieldDescriptor) {
	switch {
	case fd.IsMap():
		mp := m.Mutable(fd).Map()
		var keys []protoreflect.MapKey
		mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
			keys = append(keys, k)
			return true
		})
		for _, k := range keys {
			mp.Set(k, replacement(fd.MapValue(), mp.NewValue))
		}
	case fd.IsList():
		l := m.Mutable(fd).List()
		for i := range l.Len() {
			l.Set(i, replacement(fd, l.NewElement))
		}
	default:
		switch fd.Kind() {
		case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.MessageKind, protoreflect.GroupKind:
			m.Set(fd, replacement(fd, func() protoreflect.Value { return m.NewField(fd) }))
		default:
			m.Clear(fd)
		}
	}
}

// replacement is the value that stands in for a secret of fd's kind; newValue
// makes an empty value of that kind (used for messages).
func replacement(fd protoreflect.FieldDescriptor, newValue func() protoreflect.Value) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(Marker)
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(Marker))
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return newValue()
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(0)
	default:
		return fd.Default()
	}
}

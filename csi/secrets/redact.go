package secrets

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Redact returns s with every secret value held by any of msgs replaced by
// Marker, in every spelling Redactor knows (see the package documentation).
// It is meant for text a driver built from a request (an error message, a
// panic value) before that text is logged or returned: Strip protects the
// message, Redact protects what was derived from it. Values shorter than
// MinLen bytes are not searched for; nil messages are skipped. When nothing
// is found, s itself is returned. To redact several texts with the same
// messages, make one Redactor.
func Redact(s string, msgs ...proto.Message) string {
	if s == "" {
		return s
	}
	return NewRedactor(msgs...).Redact(s)
}

// Redactor finds the secret values of a set of messages in text. It is
// immutable and safe for concurrent use; the nil *Redactor finds nothing.
type Redactor struct {
	needles []needle
	ac      *automaton // with multiFrom or more needles, else nil
}

// NewRedactor returns a Redactor for the secret values msgs hold, at any
// depth (the same fields Strip removes). It returns nil when they hold no
// value of at least MinLen bytes, so a caller can skip work with r == nil.
func NewRedactor(msgs ...proto.Message) *Redactor {
	var vals []string
	for _, m := range msgs {
		if m != nil && m.ProtoReflect().IsValid() {
			collect(m.ProtoReflect(), false, &vals)
		}
	}
	return newRedactor(vals, multiFrom)
}

// newRedactor returns the Redactor for vals, finding them in one pass
// (automaton) when there are at least multi distinct ones. Many values are
// de-duplicated by sorting them (which the automaton wants too): comparing
// each value with those before it cost 57 s for 100,000 values (a 1 MiB
// secrets map). vals is reordered.
func newRedactor(vals []string, multi int) *Redactor {
	if len(vals) > multiFrom {
		slices.Sort(vals)
		vals = slices.Compact(vals)
	}
	var r *Redactor
	for i, v := range vals {
		if len(v) < MinLen || len(vals) <= multiFrom && slices.Contains(vals[:i], v) {
			continue
		}
		if r == nil {
			r = &Redactor{needles: make([]needle, 0, len(vals)-i)}
		}
		r.needles = append(r.needles, newNeedle(v))
	}
	if r != nil && len(r.needles) >= multi {
		r.ac = newAutomaton(r.needles)
	}
	return r
}

// Redact returns s with every spelling of every secret value replaced by
// Marker. Where spellings of one or more secrets overlap or touch, the whole
// stretch becomes one Marker, so no part of either is left. When nothing is
// found, s itself is returned. The work is bounded: a text that would take
// too long to check (only adversarial ones do: a long secret of backslashes
// or quotes against a long run of them, or thousands of secrets with
// escapable characters whose plain runs all occur in it) is replaced by
// Marker as a whole.
func (r *Redactor) Redact(s string) string {
	if r == nil || s == "" {
		return s
	}
	var spans []span
	if r.ac != nil {
		var ok bool
		if spans, ok = r.ac.find(s, r.needles, nil); !ok {
			return Marker // too costly to check: withhold it all
		}
	} else {
		var m *matcher
		for i := range r.needles {
			spans = find(s, &r.needles[i], spans, &m)
		}
		if m != nil && m.work > m.limit {
			return Marker // too costly to check: withhold it all
		}
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var b strings.Builder
	b.Grow(len(s))
	done := 0 // s[:done] is written (or replaced)
	for i := 0; i < len(spans); {
		from, to := spans[i].from, spans[i].to
		for i++; i < len(spans) && spans[i].from <= to; i++ {
			to = max(to, spans[i].to)
		}
		b.WriteString(s[done:from])
		b.WriteString(Marker)
		done = to
	}
	b.WriteString(s[done:])
	return b.String()
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

package secrets

import (
	"context"

	"github.com/csikit/csikit/internal/grpcstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// UnaryServerInterceptor returns an interceptor that passes the error of
// every failed call through RedactError with the call's request, so no
// secret of the request reaches the client in a status message or detail.
// A successful call costs nothing. Place it inside the logging interceptor
// so the log shows what the client got.
func UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			if m, ok := req.(proto.Message); ok {
				err = RedactError(err, m)
			}
		}
		return resp, err
	}
}

// RedactError returns err with every secret value msgs hold (see Redact)
// replaced by Marker in its gRPC status message and in every string of its
// status details. The code is kept. When nothing is found, err itself is
// returned; otherwise a status error (an error that is not a status is
// treated as codes.Unknown, as gRPC would send it). A detail whose type is
// not linked into the binary cannot be rewritten field by field: it is
// dropped if its encoding holds a secret.
func RedactError(err error, msgs ...proto.Message) error {
	if err == nil {
		return nil
	}
	return NewRedactor(msgs...).RedactError(err)
}

// RedactError is the package-level RedactError with r's secrets.
func (r *Redactor) RedactError(err error) error {
	if r == nil || err == nil {
		return err
	}
	st, _ := status.FromError(err)
	p := st.Proto()
	changed := false
	if msg := r.Redact(p.GetMessage()); msg != p.GetMessage() {
		p.Message, changed = msg, true
	}
	details := p.Details[:0]
	for _, d := range p.GetDetails() {
		m, uerr := d.UnmarshalNew()
		if uerr != nil {
			if v := string(d.GetValue()); r.Redact(v) != v {
				changed = true
				continue // unreadable and holds a secret: drop it
			}
			details = append(details, d)
			continue
		}
		if r.redactFields(m.ProtoReflect()) {
			a, merr := anypb.New(m)
			if merr != nil {
				changed = true
				continue
			}
			d, changed = a, true
		}
		details = append(details, d)
	}
	p.Details = details
	if !changed {
		return err
	}
	return status.ErrorProto(p)
}

// redactFields redacts, in place, every string and bytes value of m at any
// depth (map keys too) and drops unknown fields that hold a secret. It
// reports whether it changed anything.
func (r *Redactor) redactFields(m protoreflect.Message) bool {
	changed := false
	if u := m.GetUnknown(); len(u) > 0 && r.Redact(string(u)) != string(u) {
		m.SetUnknown(nil)
		changed = true
	}
	// value returns v redacted, and whether that changed it.
	value := func(v protoreflect.Value, kind protoreflect.Kind) (protoreflect.Value, bool) {
		switch kind {
		case protoreflect.StringKind:
			if s := r.Redact(v.String()); s != v.String() {
				return protoreflect.ValueOfString(s), true
			}
		case protoreflect.BytesKind:
			if s := r.Redact(string(v.Bytes())); s != string(v.Bytes()) {
				return protoreflect.ValueOfBytes([]byte(s)), true
			}
		case protoreflect.MessageKind, protoreflect.GroupKind:
			return v, r.redactFields(v.Message())
		}
		return v, false
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			mp := v.Map()
			type entry struct {
				k protoreflect.MapKey
				v protoreflect.Value
			}
			var rekey []entry
			mp.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				nv, vc := value(mv, fd.MapValue().Kind())
				if vc && fd.MapValue().Kind() != protoreflect.MessageKind {
					mp.Set(k, nv)
				}
				changed = changed || vc
				if fd.MapKey().Kind() == protoreflect.StringKind {
					if ks := r.Redact(k.String()); ks != k.String() {
						rekey = append(rekey, entry{k, nv})
					}
				}
				return true
			})
			for _, e := range rekey {
				mp.Clear(e.k)
				mp.Set(protoreflect.ValueOfString(r.Redact(e.k.String())).MapKey(), e.v)
				changed = true
			}
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				if nv, vc := value(l.Get(i), fd.Kind()); vc {
					if fd.Message() == nil {
						l.Set(i, nv)
					}
					changed = true
				}
			}
		default:
			if nv, vc := value(v, fd.Kind()); vc {
				if fd.Message() == nil {
					m.Set(fd, nv)
				}
				changed = true
			}
		}
		return true
	})
	return changed
}

// StreamServerInterceptor is UnaryServerInterceptor for streaming calls:
// the error a handler returns is redacted against every request message the
// server received on the stream.
func StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		// The requests received, for redaction. Streams in CSI are
		// server-streaming (one request), so this holds one message; only
		// the handler's goroutine receives.
		var reqs []proto.Message
		err := handler(srv, &grpcstream.Stream{ServerStream: ss, OnRecv: func(m any) error {
			if pm, ok := m.(proto.Message); ok {
				reqs = append(reqs, pm)
			}
			return nil
		}})
		if err != nil && len(reqs) > 0 {
			err = RedactError(err, reqs...)
		}
		return err
	}
}

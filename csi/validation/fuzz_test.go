package validation_test

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/validation"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

const secretMarker = "FUZZ-SECRET-7f3a9c"

type fuzzMethod struct {
	full, rpc string
	in        protoreflect.MessageType
}

func fuzzMethods(t testing.TB) []fuzzMethod {
	var out []fuzzMethod
	for _, m := range rpcMethods(t) {
		valid := validRequests()[m[0]]
		mt, err := protoregistry.GlobalTypes.FindMessageByName(valid.ProtoReflect().Descriptor().FullName())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fuzzMethod{full: m[0], rpc: m[1], in: mt})
	}
	return out
}

// fuzzConfig derives a Config from bits. Every such Config accepts a subset
// of what cfgAll accepts.
func fuzzConfig(bits uint8) *validation.Config {
	cfg := &validation.Config{
		AccessTypes:  validation.AccessType(bits & 3),
		StageUnstage: bits&4 != 0,
		ContentSources: validation.ContentSources{
			Snapshot: bits&8 != 0,
			Volume:   bits&16 != 0,
		},
	}
	if bits&32 != 0 {
		cfg.AccessModes = []csi.VolumeCapability_AccessMode_Mode{snw, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY}
	}
	if bits&64 != 0 {
		cfg.MaxIDLength, cfg.MaxNameLength, cfg.MaxNodeIDLength = 16, 16, 16
	}
	return cfg
}

// plantSecrets sets every csi_secret field of req to a marker, so the test
// can tell whether a message leaks it.
func plantSecrets(req proto.Message) {
	m := req.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !proto.GetExtension(fd.Options(), csi.E_CsiSecret).(bool) || !fd.IsMap() {
			continue
		}
		mp := m.Mutable(fd).Map()
		mp.Set(protoreflect.ValueOfString("key").MapKey(), protoreflect.ValueOfString(secretMarker))
	}
}

// FuzzValidate feeds random requests of every RPC through Validate: it must
// not panic, must answer nil, InvalidArgument or NotFound with a message
// naming the RPC, must never echo a secret, must not change the request,
// must reject any request missing a required field, and a restricted Config
// must never accept what the permissive one rejects.
func FuzzValidate(f *testing.F) {
	methods := fuzzMethods(f)
	for i, m := range methods {
		valid := validRequests()[m.full]
		b, err := proto.Marshal(valid)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b, uint8(0))
		f.Add(uint8(i), b, uint8(0x7f))
		f.Add(uint8(i), b[:len(b)/2], uint8(4))
	}
	f.Fuzz(func(t *testing.T, idx uint8, data []byte, bits uint8) {
		m := methods[int(idx)%len(methods)]
		req := m.in.New().Interface()
		_ = proto.Unmarshal(data, req) // a partly decoded message is input too
		plantSecrets(req)
		before := proto.Clone(req)

		err := validation.Validate(m.full, req, fuzzConfig(bits))
		loose := validation.Validate(m.full, req, cfgAll())

		if !proto.Equal(before, req) {
			t.Fatalf("%s: Validate changed the request", m.rpc)
		}
		for _, e := range []error{err, loose} {
			if e == nil {
				continue
			}
			st, ok := status.FromError(e)
			if !ok || (st.Code() != codes.InvalidArgument && st.Code() != codes.NotFound && st.Code() != codes.FailedPrecondition) {
				t.Fatalf("%s: got %v, want nil, InvalidArgument, NotFound or FailedPrecondition", m.rpc, e)
			}
			if !strings.HasPrefix(st.Message(), m.rpc+": ") {
				t.Fatalf("%s: message %q does not start with the RPC name", m.rpc, st.Message())
			}
			if strings.Contains(st.Message(), secretMarker) {
				t.Fatalf("%s: message %q leaks a secret", m.rpc, st.Message())
			}
		}
		if err == nil && loose != nil {
			t.Fatalf("%s: restricted config %08b accepts what the permissive one rejects: %v", m.rpc, bits, loose)
		}
		if loose == nil {
			fields := req.ProtoReflect().Descriptor().Fields()
			for _, name := range required[m.full] {
				if !req.ProtoReflect().Has(fields.ByName(protoreflect.Name(name))) {
					t.Fatalf("%s: accepted without required %s", m.rpc, name)
				}
			}
		}
	})
}

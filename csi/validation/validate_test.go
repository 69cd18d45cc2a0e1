package validation_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/validation"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/csikit/csikit/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cfgAll accepts every content source, so the fixtures' snapshot source is
// valid.
func cfgAll() *validation.Config {
	return &validation.Config{ContentSources: validation.ContentSources{Snapshot: true, Volume: true}}
}

// rpcMethods lists every method of the CSI v1.14 services as
// (full method name, short name), read from the spec's descriptor.
func rpcMethods(t testing.TB) [][2]string {
	t.Helper()
	var out [][2]string
	svcs := csi.File_csi_proto.Services()
	for i := 0; i < svcs.Len(); i++ {
		s := svcs.Get(i)
		for j := 0; j < s.Methods().Len(); j++ {
			m := s.Methods().Get(j)
			out = append(out, [2]string{"/" + string(s.FullName()) + "/" + string(m.Name()), string(m.Name())})
		}
	}
	if len(out) != 37 {
		t.Fatalf("got %d CSI methods from the descriptor, want 37 (CSI v1.14): a new spec needs table entries", len(out))
	}
	return out
}

// wantRefusal fails unless err is a status error with code want whose
// message starts with prefix.
func wantRefusal(t *testing.T, err error, want codes.Code, prefix string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want code %v", want)
	}
	if st := testenv.WantCode(t, err, want); !strings.HasPrefix(st.Message(), prefix) {
		t.Fatalf("got message %q, want prefix %q", st.Message(), prefix)
	}
}

func TestEveryRPCIsInTheTable(t *testing.T) {
	valid := validRequests()
	for _, m := range rpcMethods(t) {
		full, rpc := m[0], m[1]
		req, ok := valid[full]
		if !ok {
			t.Errorf("%s: no valid request fixture", full)
			continue
		}
		if err := validation.Validate(full, req, cfgAll()); err != nil {
			t.Errorf("%s: valid request: got %v, want nil", full, err)
		}
		// A request of the wrong type is caught only for methods the table
		// knows, which proves each one is listed.
		err := validation.Validate(full, &emptypb.Empty{}, nil)
		if status.Code(err) != codes.Internal || !strings.HasPrefix(status.Convert(err).Message(), rpc+": ") {
			t.Errorf("%s: wrong request type: got %v, want Internal starting %q", full, err, rpc+": ")
		}
	}
}

func TestUnknownMethodPasses(t *testing.T) {
	for _, m := range []string{"", "/csi.v1.Controller/NoSuchRPC", "/grpc.health.v1.Health/Check"} {
		if err := validation.Validate(m, &emptypb.Empty{}, nil); err != nil {
			t.Errorf("Validate(%q): got %v, want nil", m, err)
		}
	}
}

func TestNilRequestOfTheRightType(t *testing.T) {
	var req *csi.CreateVolumeRequest
	err := validation.Validate(csi.Controller_CreateVolume_FullMethodName, req, nil)
	wantRefusal(t, err, codes.InvalidArgument, "CreateVolume: name is required")
}

// TestRequiredFields clears each set field of each valid request in turn:
// a required field must give InvalidArgument "<RPC>: <field> is required",
// any other field must leave the request valid.
func TestRequiredFields(t *testing.T) {
	methods := rpcMethods(t)
	cases := 0
	for _, m := range methods {
		full, rpc := m[0], m[1]
		req := validRequests()[full]
		var set []protoreflect.FieldDescriptor
		req.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			set = append(set, fd)
			return true
		})
		for _, name := range required[full] {
			if !slices.ContainsFunc(set, func(fd protoreflect.FieldDescriptor) bool { return string(fd.Name()) == name }) {
				t.Fatalf("%s: fixture does not set required field %s", rpc, name)
			}
		}
		for _, fd := range set {
			name := string(fd.Name())
			t.Run(rpc+"/"+name, func(t *testing.T) {
				cases++
				r := proto.Clone(req)
				r.ProtoReflect().Clear(fd)
				err := validation.Validate(full, r, cfgAll())
				if slices.Contains(required[full], name) {
					wantRefusal(t, err, codes.InvalidArgument, rpc+": "+name+" is required")
					return
				}
				if err != nil {
					t.Fatalf("clearing optional %s: got %v, want nil", name, err)
				}
			})
		}
	}
	if cases < 100 {
		t.Fatalf("ran %d field cases, want at least 100", cases)
	}
}

// With StageUnstage, NodePublishVolume also requires staging_target_path.
func TestStagingPathRequiredWhenStaging(t *testing.T) {
	req := validRequests()[csi.Node_NodePublishVolume_FullMethodName].(*csi.NodePublishVolumeRequest)
	req.StagingTargetPath = ""
	if err := validation.Validate(csi.Node_NodePublishVolume_FullMethodName, req, &validation.Config{}); err != nil {
		t.Fatalf("without StageUnstage: got %v, want nil", err)
	}
	err := validation.Validate(csi.Node_NodePublishVolume_FullMethodName, req, &validation.Config{StageUnstage: true})
	wantRefusal(t, err, codes.FailedPrecondition, "NodePublishVolume: staging_target_path is required")
}

// Required fields are checked in the spec's order, so a request missing
// everything names the first one, as csi-sanity's cases expect.
func TestEmptyRequestsNameTheFirstRequiredField(t *testing.T) {
	for _, m := range rpcMethods(t) {
		full, rpc := m[0], m[1]
		req := validRequests()[full]
		empty := req.ProtoReflect().New().Interface()
		err := validation.Validate(full, empty, nil)
		want := required[full]
		if len(want) == 0 {
			if err != nil {
				t.Errorf("%s{}: got %v, want nil", rpc, err)
			}
			continue
		}
		if got := status.Convert(err).Message(); status.Code(err) != codes.InvalidArgument || got != rpc+": "+want[0]+" is required" {
			t.Errorf("%s{}: got %v %q, want InvalidArgument %q", rpc, status.Code(err), got, rpc+": "+want[0]+" is required")
		}
	}
}

func TestValidatorDoesNotModifyTheRequest(t *testing.T) {
	for full, req := range validRequests() {
		before := proto.Clone(req)
		_ = validation.Validate(full, req, cfgAll())
		if !proto.Equal(before, req) {
			t.Errorf("%s: request changed by Validate", full)
		}
	}
}

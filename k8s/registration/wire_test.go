package registration_test

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/csikit/csikit/k8s/registration"
)

// rawCodec sends and receives protobuf bytes untouched, so this test checks
// the wire format by field numbers alone, independent of generated types.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// TestWireFormat calls the registration service by its full method names
// with hand-encoded messages and decodes the answer field by field, as
// kubelet's pluginregistration.proto defines them: PluginInfo{1 type,
// 2 name, 3 endpoint, 4 repeated supported_versions},
// RegistrationStatus{1 plugin_registered, 2 error}.
func TestWireFormat(t *testing.T) {
	r, err := registration.New(registration.Options{
		DriverName: driverName, Endpoint: "/plugins/x/csi.sock", Dir: shortDir(t),
		SupportedVersions: []string{"1.0.0", "1.2.0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	startRegistrar(t, r)
	conn := dialLikeKubelet(t, r.SocketPath())
	ctx := context.Background()

	req, resp := []byte{}, []byte(nil)
	if err := conn.Invoke(ctx, "/pluginregistration.Registration/GetInfo", &req, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
		t.Fatalf("GetInfo by full name: %v", err)
	}
	fields := map[protowire.Number][]string{}
	for b := resp; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			t.Fatalf("PluginInfo: got tag %d type %d, want length-delimited fields", num, typ)
		}
		b = b[n:]
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			t.Fatal("PluginInfo: truncated field")
		}
		fields[num] = append(fields[num], string(v))
		b = b[m:]
	}
	for num, want := range map[protowire.Number][]string{
		1: {"CSIPlugin"}, 2: {driverName}, 3: {"/plugins/x/csi.sock"}, 4: {"1.0.0", "1.2.0"},
	} {
		if got := fields[num]; !slices.Equal(got, want) {
			t.Errorf("PluginInfo field %d: got %q, want %q", num, got, want)
		}
	}

	var st []byte
	st = protowire.AppendTag(st, 1, protowire.VarintType)
	st = protowire.AppendVarint(st, 0)
	st = protowire.AppendTag(st, 2, protowire.BytesType)
	st = protowire.AppendString(st, "no NodeGetInfo")
	if err := conn.Invoke(ctx, "/pluginregistration.Registration/NotifyRegistrationStatus", &st, &resp, grpc.ForceCodec(rawCodec{})); err != nil {
		t.Fatalf("NotifyRegistrationStatus by full name: %v", err)
	}
	if s := r.Status(); !s.Notified || s.Registered || s.Error != "no NodeGetInfo" {
		t.Errorf("after a hand-encoded failure: got %+v, want notified, unregistered, %q", s, "no NodeGetInfo")
	}
}

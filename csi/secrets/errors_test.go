package secrets_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/csi/secrets"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

const errSecret = "s3cr\"et\\pa<ss>w\u00f6rd\n"

var errReq = &csi.NodeStageVolumeRequest{VolumeId: "vol-1", Secrets: map[string]string{"key": errSecret}}

// leaks reports which spelling of errSecret s still holds.
func leaks(s string) string {
	j, _ := json.Marshal(errSecret)
	for _, n := range []string{errSecret, qi(errSecret), qai(errSecret), ji(errSecret), string(j[1 : len(j)-1]), ji(qi(errSecret)), "s3cr", "rd\n"} {
		if strings.Contains(s, n) {
			return n
		}
	}
	return ""
}

func TestRedactErrorMessage(t *testing.T) {
	j, _ := json.Marshal(map[string]string{"key": errSecret})
	for _, err := range []error{
		status.Error(codes.Internal, "mount -o key="+errSecret+" failed"),
		status.Errorf(codes.InvalidArgument, "bad key %q", errSecret),
		status.Errorf(codes.Unavailable, "backend said: %s", j),
		fmt.Errorf("wrapped: %w", status.Errorf(codes.NotFound, "no key %+q", errSecret)),
		errors.New("plain error with " + errSecret),
	} {
		got := secrets.RedactError(err, errReq)
		st, ok := status.FromError(got)
		if !ok {
			t.Fatalf("RedactError(%v) = %v, not a status", err, got)
		}
		if n := leaks(st.Message()); n != "" {
			t.Errorf("RedactError(%q).Message() = %q; holds %q", err, st.Message(), n)
		}
		if !strings.Contains(st.Message(), secrets.Marker) {
			t.Errorf("RedactError(%q).Message() = %q; want %s", err, st.Message(), secrets.Marker)
		}
		if got, want := st.Code(), status.Code(err); got != want {
			t.Errorf("RedactError(%q): code %v, want %v", err, got, want)
		}
	}
}

func TestRedactErrorUnchanged(t *testing.T) {
	for _, err := range []error{
		nil,
		status.Error(codes.NotFound, "volume vol-1 not found"),
		context.Canceled,
	} {
		if got := secrets.RedactError(err, errReq); got != err {
			t.Errorf("RedactError(%v) = %v, want err itself", err, got)
		}
	}
	err := status.Error(codes.Internal, "key "+errSecret)
	if got := secrets.RedactError(err, &csi.ProbeRequest{}); got != err {
		t.Errorf("RedactError without secrets = %v, want err itself", got)
	}
}

func TestRedactErrorDetails(t *testing.T) {
	st := status.New(codes.FailedPrecondition, "see details")
	detail := &csi.Volume{VolumeId: "vol-1",
		VolumeContext: map[string]string{"opts": "key=" + errSecret, "k-" + errSecret: "v"},
		ContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: fmt.Sprintf("%q", errSecret)}}},
	}
	clean := &csi.Volume{VolumeId: "vol-2"}
	st, err := st.WithDetails(detail, clean)
	if err != nil {
		t.Fatal(err)
	}
	p := st.Proto()
	// A detail of a type this binary does not know, holding the secret.
	p.Details = append(p.Details, &anypb.Any{TypeUrl: "type.googleapis.com/vendor.Unknown", Value: []byte("\x0a\x10" + errSecret)},
		&anypb.Any{TypeUrl: "type.googleapis.com/vendor.Harmless", Value: []byte("\x0a\x02ok")})
	got := status.Convert(secrets.RedactError(status.ErrorProto(p), errReq))
	if got.Code() != codes.FailedPrecondition || got.Message() != "see details" {
		t.Errorf("got %v %q, want FailedPrecondition, message kept", got.Code(), got.Message())
	}
	gp := got.Proto()
	if n := len(gp.GetDetails()); n != 3 {
		t.Fatalf("got %d details, want 3 (the unknown one with a secret dropped)", n)
	}
	for _, d := range gp.GetDetails() {
		if n := leaks(string(d.GetValue())); n != "" {
			t.Errorf("detail %s holds %q", d.GetTypeUrl(), n)
		}
	}
	var v csi.Volume
	if err := gp.GetDetails()[0].UnmarshalTo(&v); err != nil {
		t.Fatal(err)
	}
	if v.GetVolumeId() != "vol-1" || v.GetVolumeContext()["opts"] != "key="+secrets.Marker ||
		v.GetVolumeContext()["k-"+secrets.Marker] != "v" ||
		v.GetContentSource().GetSnapshot().GetSnapshotId() != `"`+secrets.Marker+`"` {
		t.Errorf("redacted detail = %v", &v)
	}
	var c csi.Volume
	if err := gp.GetDetails()[1].UnmarshalTo(&c); err != nil || !proto.Equal(&c, clean) {
		t.Errorf("clean detail = %v, %v; want it unchanged", &c, err)
	}
	if gp.GetDetails()[2].GetTypeUrl() != "type.googleapis.com/vendor.Harmless" {
		t.Errorf("harmless unknown detail lost: %v", gp.GetDetails()[2])
	}
}

func TestUnaryServerInterceptor(t *testing.T) {
	i := secrets.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/csi.v1.Node/NodeStageVolume"}
	_, err := i(context.Background(), errReq, info, func(context.Context, any) (any, error) {
		return nil, status.Errorf(codes.Internal, "stage failed: key %q", errSecret)
	})
	if st := status.Convert(err); st.Code() != codes.Internal || leaks(st.Message()) != "" || !strings.Contains(st.Message(), secrets.Marker) {
		t.Errorf("interceptor returned %v", err)
	}
	resp := &csi.NodeStageVolumeResponse{}
	got, err := i(context.Background(), errReq, info, func(context.Context, any) (any, error) { return resp, nil })
	if got != resp || err != nil {
		t.Errorf("successful call: got %v, %v", got, err)
	}
}

package csikit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csi/secrets"
	"github.com/csikit/csikit/internal/testenv"
)

// secretSpellings are the ways a secret can appear in a client's error or
// a JSON log line: as is, Go-quoted, JSON-escaped, and JSON of Go-quoted.
func secretSpellings(s string) []string {
	q := strconv.Quote(s)
	j, _ := json.Marshal(s)
	jq, _ := json.Marshal(q)
	a := strconv.QuoteToASCII(s)
	return []string{s, q[1 : len(q)-1], string(j[1 : len(j)-1]), string(jq[3 : len(jq)-3]), a[1 : len(a)-1]}
}

// A driver error that embeds a request's secret reaches neither the client
// (whose sidecar would copy it into an Event) nor the log, in any spelling.
func TestDriverErrorsAreRedacted(t *testing.T) {
	const secret = "pa\"ss\\w<o>rd\u00e9\n-42"
	j, _ := json.Marshal(map[string]string{"password": secret})
	var log testenv.SyncBuffer
	errs := []error{
		status.Error(codes.Internal, "mount -o password="+secret+" failed"),
		status.Errorf(codes.InvalidArgument, "bad password %q", secret),
		status.Errorf(codes.Unavailable, "backend answered %s", j),
		fmt.Errorf("not a status: %+q", secret),
	}
	next := 0
	d := &nodeDriver{publish: func(_ context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
		err := errs[next]
		next++
		if r.GetSecrets()["password"] != secret {
			return nil, status.Error(codes.Internal, "test: secret did not reach the driver")
		}
		return nil, err
	}}
	s := serve(t, d, csikit.Options{NodeID: "node-1", Logger: slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	for _, want := range errs {
		_, err := s.node().NodePublishVolume(t.Context(), &csi.NodePublishVolumeRequest{
			VolumeId: "vol-1", TargetPath: "/mnt/target", StagingTargetPath: "/mnt/staging",
			VolumeCapability: &csi.VolumeCapability{
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			},
			Secrets: map[string]string{"password": secret},
		})
		st := status.Convert(err)
		if st.Code() != status.Code(want) {
			t.Errorf("driver returned %v; client got code %v, want %v", want, st.Code(), status.Code(want))
		}
		if !strings.Contains(st.Message(), secrets.Marker) {
			t.Errorf("driver returned %q; client got %q, want the secret replaced by %s", want, st.Message(), secrets.Marker)
		}
		for _, n := range secretSpellings(secret) {
			if strings.Contains(st.Message(), n) {
				t.Errorf("client got %q; holds the secret as %q", st.Message(), n)
			}
		}
	}
	out := log.String()
	if strings.Count(out, `"msg":"call finished"`) != len(errs) {
		t.Errorf("want %d finished lines, log:\n%s", len(errs), out)
	}
	for _, n := range secretSpellings(secret) {
		for _, n2 := range secretSpellings(n) {
			if strings.Contains(out, n2) {
				t.Errorf("log holds the secret as %q:\n%s", n2, out)
			}
		}
	}
}

package csikit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/internal/testenv"
)

func TestMetricsFromOptionsRegistry(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	d := &ctrlDriver{create: func(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
		if r.GetName() == "boom" {
			panic("driver bug")
		}
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-" + r.GetName()}}, nil
	}}
	s := serve(t, d, csikit.Options{Name: "metrics.csikit.dev", Registry: reg})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := s.identity().Probe(ctx, &csi.ProbeRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	secretReq := newCreate("")
	secretReq.Secrets = map[string]string{"password": "never-in-a-label"}
	_, err := s.controller().CreateVolume(ctx, secretReq)
	testenv.WantCode(t, err, codes.InvalidArgument)
	_, err = s.controller().CreateVolume(ctx, newCreate("boom"))
	testenv.WantCode(t, err, codes.Internal)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	panics := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "csi_plugin_panics_recovered_total" {
			for _, m := range mf.GetMetric() {
				panics += m.GetCounter().GetValue()
			}
		}
		if mf.GetName() != "csi_plugin_operations_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
				if strings.Contains(l.GetValue(), "never-in-a-label") {
					t.Errorf("secret in a label: %v", l)
				}
			}
			if labels["driver_name"] != "metrics.csikit.dev" {
				t.Errorf("driver_name: got %q", labels["driver_name"])
			}
			counts[labels["method_name"]+" "+labels["grpc_status_code"]] += m.GetHistogram().GetSampleCount()
		}
	}
	for key, n := range map[string]uint64{
		"/csi.v1.Identity/Probe OK":                       3,
		"/csi.v1.Controller/CreateVolume InvalidArgument": 1,
		"/csi.v1.Controller/CreateVolume Internal":        1,
	} {
		if counts[key] != n {
			t.Errorf("csi_plugin_operations_seconds count for %s: got %d, want %d (all: %v)", key, counts[key], n, counts)
		}
	}
	if panics != 1 {
		t.Errorf("csi_plugin_panics_recovered_total: got %v, want 1 (one panic, recovered once)", panics)
	}
	if n := testutil.CollectAndCount(reg, "csi_plugin_volume_locks_held"); n != 1 {
		t.Errorf("csi_plugin_volume_locks_held series: got %d, want 1", n)
	}
}

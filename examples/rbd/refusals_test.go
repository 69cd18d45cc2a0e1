//go:build linux

package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
)

// TestRefusedCreateKeepsNoReservation: a CreateVolume the driver refuses
// (InvalidArgument, OutOfRange) after the journal reserved its name drops
// that reservation, so the CO's corrected retry (other parameters, same
// name) succeeds instead of answering AlreadyExists for a day; nothing is
// left in the pool by the refused calls.
func TestRefusedCreateKeepsNoReservation(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := scratchPool(t, c)
	p := startDriver(t, c, pool, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		bad  func(*csi.CreateVolumeRequest)
		code codes.Code
	}{
		{"unknown-feature", func(r *csi.CreateVolumeRequest) { r.Parameters["imageFeatures"] = "layering,bogus" }, codes.InvalidArgument},
		{"bad-mapper", func(r *csi.CreateVolumeRequest) { r.Parameters["mapper"] = "iscsi" }, codes.InvalidArgument},
		{"too-big", func(r *csi.CreateVolumeRequest) { r.CapacityRange = &csi.CapacityRange{RequiredBytes: 1 << 60} }, codes.OutOfRange},
	} {
		bad := createReq("refused-"+tc.name, pool, secrets)
		tc.bad(bad)
		if _, err := p.ctrl.CreateVolume(ctx, bad); status.Code(err) != tc.code {
			t.Fatalf("%s: CreateVolume = %v, want %s", tc.name, err, tc.code)
		}
		resp, err := p.ctrl.CreateVolume(ctx, createReq("refused-"+tc.name, pool, secrets))
		if err != nil {
			t.Fatalf("%s: the corrected retry answered %v; want success (the refused call's reservation must be dropped)", tc.name, err)
		}
		if _, err := p.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: secrets}); err != nil {
			t.Fatal(err)
		}
	}
	if imgs := poolImages(t, c, secrets, pool); len(imgs) != 0 {
		t.Fatalf("pool holds %v after the refused and deleted volumes", imgs)
	}
}

// TestInvalidImageParameters: feature combinations librbd refuses and a
// data pool that does not exist are the StorageClass's mistakes:
// InvalidArgument saying what to change, no image made, no reservation
// kept (a corrected class then works under the same name).
func TestInvalidImageParameters(t *testing.T) {
	c := cephtest.Require(t)
	pool, secrets := scratchPool(t, c)
	p := startDriver(t, c, pool, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		param, value, want string
	}{
		{"imageFeatures", "layering,object-map", "needs exclusive-lock"},
		{"imageFeatures", "layering,exclusive-lock,fast-diff", "needs object-map"},
		{"imageFeatures", "layering,journaling", "needs exclusive-lock"},
		{"dataPool", "no-such-pool", "does not exist"},
		{"dataPool", "", "is empty"},
	} {
		name := "params-" + strings.NewReplacer(",", "-", "_", "-").Replace(tc.param+"-"+tc.value)
		req := createReq(name, pool, secrets)
		req.Parameters[tc.param] = tc.value
		_, err := p.ctrl.CreateVolume(ctx, req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.want) {
			t.Errorf("%s=%q: CreateVolume = %v; want InvalidArgument saying %q", tc.param, tc.value, err, tc.want)
			continue
		}
		if imgs := poolImages(t, c, secrets, pool); len(imgs) != 0 {
			t.Errorf("%s=%q: refused, yet the pool holds %v", tc.param, tc.value, imgs)
		}
		resp, err := p.ctrl.CreateVolume(ctx, createReq(name, pool, secrets))
		if err != nil {
			t.Errorf("%s=%q: the corrected create answered %v", tc.param, tc.value, err)
			continue
		}
		if _, err := p.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: secrets}); err != nil {
			t.Fatal(err)
		}
	}
	// A data pool that exists works: the image's data lands there.
	dataPool := cephtest.NewPool(t, cephtest.Admin(t, c))
	req := createReq("params-data-pool", pool, secrets)
	req.Parameters["dataPool"] = dataPool
	resp, err := p.ctrl.CreateVolume(ctx, req)
	if err != nil {
		t.Fatalf("dataPool=%s (exists): %v", dataPool, err)
	}
	if _, err := p.ctrl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: secrets}); err != nil {
		t.Fatal(err)
	}
}

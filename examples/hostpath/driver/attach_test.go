//go:build linux

package driver_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/hostpath/driver"
)

// TestAttachLimitCountsAcrossRestarts checks the attach limit
// (MaxVolumesPerNode) at the limit, after an unpublish frees a slot, and
// after a restart, which rebuilds the count from the durable records.
func TestAttachLimitCountsAcrossRestarts(t *testing.T) {
	needRoot(t)
	dir := shortDir(t, "hp-attach")
	opts := driver.Options{StateDir: filepath.Join(dir, "state"), EnableAttach: true, MaxVolumesPerNode: 2}
	s := serve(t, dir, opts)
	ctx := context.Background()
	var ids []string
	for i := range 3 {
		ids = append(ids, createVol(t, s, fmt.Sprintf("attach-%d", i), 1<<20, capFor(false, ""), nil))
	}
	publish := func(s *served, id string) error {
		_, err := s.ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "test-node", VolumeCapability: capFor(false, "")})
		return err
	}
	for _, id := range ids[:2] {
		if err := publish(s, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := publish(s, ids[0]); err != nil {
		t.Fatalf("republishing an attached volume at the limit: %v", err)
	}
	if err := publish(s, ids[2]); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third publish at a limit of 2: %v, want ResourceExhausted", err)
	}
	s.stop()
	s = serve(t, dir, opts)
	if err := publish(s, ids[2]); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third publish after a restart: %v, want ResourceExhausted", err)
	}
	if _, err := s.ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: ids[0], NodeId: "test-node"}); err != nil {
		t.Fatal(err)
	}
	if err := publish(s, ids[2]); err != nil {
		t.Fatalf("publish after an unpublish freed a slot: %v", err)
	}
}

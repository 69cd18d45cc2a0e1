//go:build linux

package driver_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit/examples/hostpath/driver"
)

// TestListVolumesEntriesMatchCreate lists volumes of every kind a page of
// two at a time: each entry is the volume CreateVolume returned (its
// context, capacity and topology), though a page's entries share what
// they have in common.
func TestListVolumesEntriesMatchCreate(t *testing.T) {
	needRoot(t)
	s := serve(t, "", driver.Options{StateDir: t.TempDir()})
	ctx := context.Background()
	block := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	want := map[string]*csi.Volume{}
	for i, c := range []struct {
		cap    *csi.VolumeCapability
		params map[string]string
	}{
		{mountCapability(), nil},
		{block, nil},
		{mountCapability(), map[string]string{driver.ParamFSType: "ext4"}},
		{mountCapability(), nil},
		{block, nil},
		{mountCapability(), map[string]string{driver.ParamFSType: "xfs"}},
		{mountCapability(), nil},
	} {
		r, err := s.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: fmt.Sprintf("list-%d", i), Parameters: c.params,
			CapacityRange: &csi.CapacityRange{RequiredBytes: int64(i+1) << 24}, VolumeCapabilities: []*csi.VolumeCapability{c.cap}})
		if err != nil {
			t.Fatal(err)
		}
		want[r.GetVolume().GetVolumeId()] = r.GetVolume()
	}
	tok, seen := "", 0
	for {
		r, err := s.ctl.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetEntries()) > 2 {
			t.Fatalf("a page of %d entries, asked for 2", len(r.GetEntries()))
		}
		for _, e := range r.GetEntries() {
			w := want[e.GetVolume().GetVolumeId()]
			if !proto.Equal(e.GetVolume(), w) {
				t.Errorf("listed %v, created %v", e.GetVolume(), w)
			}
			if len(e.GetStatus().GetPublishedNodeIds()) != 0 {
				t.Errorf("%s: published to %v, want none", e.GetVolume().GetVolumeId(), e.GetStatus().GetPublishedNodeIds())
			}
			seen++
		}
		if tok = r.GetNextToken(); tok == "" {
			break
		}
	}
	if seen != len(want) {
		t.Errorf("listed %d volumes, created %d", seen, len(want))
	}
}

//go:build linux

package driver_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/journal"
)

// TestListVolumesPages: ListVolumes walked a page at a time (pages of 1,
// 2 and 3) answers every volume once, in ID order, with its current size
// (one grown after create shows its new size), leaves out images that are
// not the driver's volumes (other names, a csi-vol- name that is no ID),
// and a token whose volume was deleted since continues at the next one.
func TestListVolumesPages(t *testing.T) {
	c := cephtest.Require(t)
	d := newDriver(t, c, driver.Options{})
	ctx := context.Background()
	io := adminlessIO(t, c)
	for _, name := range []string{"list-foreign-" + journal.RandomID("")[:8], "csi-vol-m0123", "csi-vol-Zffffffffffffffffffffffffffffffff"} {
		if err := rbd.CreateImage(io, name, 1<<20, rbd.NewRbdImageOptions()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rbd.RemoveImage(io, name) })
	}
	sizes := map[string]int64{}
	var mine []string
	for i, block := range []bool{false, true, false, true, false} {
		vc := mountCap
		if block {
			vc = []*csi.VolumeCapability{{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}}
		}
		req := &csi.CreateVolumeRequest{Name: "list-" + journal.RandomID(""), VolumeCapabilities: vc, Secrets: c.Secrets(),
			CapacityRange: &csi.CapacityRange{RequiredBytes: int64(i+1) << 20}}
		rctx, _ := reservedVolumeID(t, d, c, req)
		resp, err := d.CreateVolume(rctx, req)
		if err != nil {
			t.Fatal(err)
		}
		id := resp.GetVolume().GetVolumeId()
		t.Cleanup(func() { _, _ = d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id, Secrets: c.Secrets()}) })
		sizes[id] = resp.GetVolume().GetCapacityBytes()
		mine = append(mine, id)
	}
	grown := mine[1]
	if _, err := d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: grown, Secrets: c.Secrets(),
		CapacityRange: &csi.CapacityRange{RequiredBytes: 40 << 20}}); err != nil {
		t.Fatal(err)
	}
	sizes[grown] = 40 << 20
	walk := func(max int32) []*csi.Volume {
		t.Helper()
		var all []*csi.Volume
		tok := ""
		for {
			resp, err := d.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: max, StartingToken: tok})
			if err != nil {
				t.Fatalf("ListVolumes(max %d, token %q): %v", max, tok, err)
			}
			if max > 0 && len(resp.GetEntries()) > int(max) {
				t.Fatalf("a page of %d entries; asked for %d", len(resp.GetEntries()), max)
			}
			for _, e := range resp.GetEntries() {
				all = append(all, e.GetVolume())
			}
			if tok = resp.GetNextToken(); tok == "" {
				return all
			}
		}
	}
	for _, max := range []int32{0, 1, 2, 3} {
		all := walk(max)
		var ids []string
		got := map[string]int{}
		for _, v := range all {
			ids = append(ids, v.GetVolumeId())
			got[v.GetVolumeId()]++
			if want, ok := sizes[v.GetVolumeId()]; ok && v.GetCapacityBytes() != want {
				t.Errorf("max %d: %s listed with %d bytes; want %d", max, v.GetVolumeId(), v.GetCapacityBytes(), want)
			}
		}
		if !slices.IsSorted(ids) {
			t.Errorf("max %d: not in ID order: %q", max, ids)
		}
		for _, id := range mine {
			if got[id] != 1 {
				t.Errorf("max %d: %s listed %d times; want once", max, id, got[id])
			}
		}
		for id, n := range got {
			if n != 1 {
				t.Errorf("max %d: %s listed %d times", max, id, n)
			}
			if _, ok := driver.ParseVolumeID(id); !ok {
				t.Errorf("max %d: listed %q, which is no volume ID", max, id)
			}
		}
	}
	// A token whose volume is deleted meanwhile: the walk goes on at the next.
	sorted := slices.Clone(mine)
	slices.Sort(sorted)
	gone := sorted[2]
	if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: gone, Secrets: c.Secrets()}); err != nil {
		t.Fatal(err)
	}
	after, err := d.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 1, StartingToken: gone})
	if err != nil {
		t.Fatalf("ListVolumes from the token of a deleted volume: %v", err)
	}
	if len(after.GetEntries()) != 1 || after.GetEntries()[0].GetVolume().GetVolumeId() <= gone || after.GetEntries()[0].GetVolume().GetVolumeId() > sorted[3] {
		t.Errorf("from the token of deleted %s: %v; want the next volume", gone, after.GetEntries())
	}
}

// TestListVolumesRecordedSizes: ListVolumes reports the size the driver
// recorded at create and expand, not the image header's: an out-of-band
// `rbd resize` is not seen until the next expand, after which the
// expanded size is. A volume with no recorded size (made by a version
// that recorded none) is listed with its header's size, and DeleteVolume
// removes the record.
func TestListVolumesRecordedSizes(t *testing.T) {
	c := cephtest.Require(t)
	d := newDriver(t, c, driver.Options{})
	ctx := context.Background()
	io := adminlessIO(t, c)
	jpool := driver.NewConnPool(c.Monitors, 30*time.Second, time.Minute)
	t.Cleanup(jpool.Close)
	jio, jdone, err := jpool.IOContext(ctx, driver.Credentials{User: c.User, Key: c.Key}, c.Pool, driver.JournalNamespace)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(jdone)
	create := func() string {
		t.Helper()
		req := &csi.CreateVolumeRequest{Name: "sizes-" + journal.RandomID(""), VolumeCapabilities: mountCap, Secrets: c.Secrets(),
			CapacityRange: &csi.CapacityRange{RequiredBytes: 8 << 20}}
		rctx, _ := reservedVolumeID(t, d, c, req)
		resp, err := d.CreateVolume(rctx, req)
		if err != nil {
			t.Fatal(err)
		}
		id := resp.GetVolume().GetVolumeId()
		t.Cleanup(func() { _, _ = d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id, Secrets: c.Secrets()}) })
		return id
	}
	resize := func(id string, size uint64) { // as `rbd resize` would
		t.Helper()
		img, err := rbd.OpenImage(io, "csi-vol-"+localOf(id), rbd.NoSnapshot)
		if err != nil {
			t.Fatal(err)
		}
		defer img.Close()
		if err := img.Resize(size); err != nil {
			t.Fatal(err)
		}
	}
	listed := func() map[string]int64 {
		t.Helper()
		resp, err := d.ListVolumes(ctx, &csi.ListVolumesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, e := range resp.GetEntries() {
			out[e.GetVolume().GetVolumeId()] = e.GetVolume().GetCapacityBytes()
		}
		return out
	}
	grown, old := create(), create()

	resize(grown, 16<<20)
	if got := listed()[grown]; got != 8<<20 {
		t.Errorf("after an out-of-band resize to 16 MiB: listed with %d bytes; want the provisioned %d", got, 8<<20)
	}
	if _, err := d.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: grown, Secrets: c.Secrets(),
		CapacityRange: &csi.CapacityRange{RequiredBytes: 40 << 20}}); err != nil {
		t.Fatal(err)
	}
	if got := listed()[grown]; got != 40<<20 {
		t.Errorf("after an expand to 40 MiB: listed with %d bytes; want %d", got, 40<<20)
	}

	// As an older version left it: no recorded size.
	if err := jio.RmOmapKeys(driver.SizesObject, []string{"csi-vol-" + localOf(old)}); err != nil {
		t.Fatal(err)
	}
	resize(old, 24<<20)
	if got := listed()[old]; got != 24<<20 {
		t.Errorf("a volume without a recorded size: listed with %d bytes; want its header's %d", got, 24<<20)
	}

	if _, err := d.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: grown, Secrets: c.Secrets()}); err != nil {
		t.Fatal(err)
	}
	m, _, err := driver.ReadOmap(jio, driver.SizesObject)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m["csi-vol-"+localOf(grown)]; ok {
		t.Errorf("DeleteVolume left the recorded size %q of %s", v, grown)
	}
}

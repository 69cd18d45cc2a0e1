//go:build linux

package driver_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/hostpath/driver"
)

// TestGroupDeleteLocksItsMembers: DeleteVolumeGroupSnapshot must not
// delete a member snapshot while a volume is restored from it, whatever
// snapshot_ids lists — csi-sanity sends none, and a request may repeat an
// ID — because the driver locks the members of its own record
// (Driver.LockKeys). And snapshot_ids must be the group's set: [m0, m0]
// for a group of m0 and m1 is InvalidArgument, not a delete of both.
func TestGroupDeleteLocksItsMembers(t *testing.T) {
	needRoot(t)
	dir := shortDir(t, "hpgrp")
	state := filepath.Join(dir, "state")
	var (
		mu      sync.Mutex
		hold    chan struct{} // closed to let a held restore go on
		holding = make(chan struct{}, 1)
	)
	s := serve(t, dir, driver.Options{StateDir: state, Step: func(step string) {
		mu.Lock()
		h := hold
		mu.Unlock()
		if step == "volume:reserved" && h != nil {
			holding <- struct{}{}
			<-h
		}
	}})
	ctx := context.Background()
	grp := csi.NewGroupControllerClient(s.conn)

	data := bytes.Repeat([]byte("restored data "), 1<<14)
	var srcs []string
	for _, name := range []string{"a", "b"} {
		id := createVol(t, s, name, 16<<20, capFor(false, ""), nil)
		if err := os.WriteFile(filepath.Join(volDir(t, s, state, id), "data"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, id)
	}
	g, err := grp.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "g", SourceVolumeIds: srcs})
	if err != nil {
		t.Fatal(err)
	}
	gid := g.GetGroupSnapshot().GetGroupSnapshotId()
	var members []string
	for _, x := range g.GetGroupSnapshot().GetSnapshots() {
		members = append(members, x.GetSnapshotId())
	}
	if len(members) != 2 {
		t.Fatalf("group snapshot has members %v, want 2", members)
	}
	m0, m1 := members[0], members[1]

	// A restore from m0, held after its capacity is reserved.
	mu.Lock()
	hold = make(chan struct{})
	release := hold
	mu.Unlock()
	restored := make(chan error, 1)
	var restoredID string
	go func() {
		resp, err := s.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "restore",
			CapacityRange:      &csi.CapacityRange{RequiredBytes: 16 << 20},
			VolumeCapabilities: []*csi.VolumeCapability{capFor(false, "")}, VolumeContentSource: snapshotSource(m0)})
		restoredID = resp.GetVolume().GetVolumeId()
		restored <- err
	}()
	<-holding
	mu.Lock()
	hold = nil
	mu.Unlock()

	for _, ids := range [][]string{nil, {m0, m0}, {m1, m1}, {m1, m0}} {
		_, err := grp.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: gid, SnapshotIds: ids})
		if status.Code(err) != codes.Aborted {
			t.Errorf("DeleteVolumeGroupSnapshot with snapshot_ids %q while a volume is restored from member %s: %v, want Aborted", ids, m0, err)
		}
	}
	close(release)
	if err := <-restored; err != nil {
		t.Fatalf("restore from %s: %v", m0, err)
	}
	got, err := os.ReadFile(filepath.Join(state, "volumes", restoredID, "data"))
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("restored volume holds %d bytes (%v), want the snapshot's %d", len(got), err, len(data))
	}

	// With nothing restoring, snapshot_ids that are not the group's set
	// are refused, and nothing is deleted.
	for _, ids := range [][]string{{m0, m0}, {m1, m1}, {m0}, {m0, m1, m0}, {m0, "other"}} {
		_, err := grp.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: gid, SnapshotIds: ids})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("DeleteVolumeGroupSnapshot with snapshot_ids %q of group %q: %v, want InvalidArgument", ids, members, err)
		}
		if _, err := grp.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: gid, SnapshotIds: ids}); status.Code(err) != codes.InvalidArgument {
			t.Errorf("GetVolumeGroupSnapshot with snapshot_ids %q of group %q: %v, want InvalidArgument", ids, members, err)
		}
	}
	for _, m := range members {
		if _, err := os.Stat(filepath.Join(state, "snapshots", m)); err != nil {
			t.Errorf("member %s after refused deletes: %v", m, err)
		}
	}
	if _, err := grp.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: gid, SnapshotIds: []string{m1, m0}}); err != nil {
		t.Fatalf("DeleteVolumeGroupSnapshot listing the group's members: %v", err)
	}
	for _, m := range members {
		if _, err := os.Stat(filepath.Join(state, "snapshots", m)); !os.IsNotExist(err) {
			t.Errorf("member %s after the group's delete: %v, want it gone", m, err)
		}
	}
}

//go:build linux

package driver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/hostpath/driver"
)

// tmpfsState mounts a tmpfs of size at dir/state for the driver's state,
// unmounted at cleanup (after the driver stops: cleanups run in reverse).
func tmpfsState(t *testing.T, dir, size string) string {
	t.Helper()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", state, "tmpfs", 0, "size="+size); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(state, 0); err != nil {
			unix.Unmount(state, unix.MNT_DETACH)
		}
	})
	return state
}

// fillDisk fills the filesystem of state with a file and returns it. The
// journal's file is preallocated with zeros, which a filesystem that
// compresses or deduplicates (btrfs, ZFS) does not really reserve; to
// reproduce that on tmpfs the zero pages of journal.db are punched out
// first (its content is unchanged), so the journal's next append needs
// new blocks, as the outside review's full disk did.
func fillDisk(t *testing.T, state string) string {
	t.Helper()
	j, err := os.OpenFile(filepath.Join(state, "journal.db"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	page := make([]byte, 4096)
	zero := make([]byte, 4096)
	for off := int64(0); ; off += 4096 {
		n, err := j.ReadAt(page, off)
		if n == len(page) && bytes.Equal(page, zero) {
			if err := unix.Fallocate(int(j.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, 4096); err != nil {
				t.Fatal(err)
			}
		}
		if err == io.EOF || n < len(page) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	fill := filepath.Join(state, "fill")
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{1 << 20, 4096} {
		buf := bytes.Repeat([]byte{0xa5}, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, unix.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	return fill
}

// TestAcknowledgedStateSurvivesFullDisk: when the journal's write that
// ends a create or delete call fails on a full disk — CreateVolume,
// CreateSnapshot, CreateVolumeGroupSnapshot and their deletes — the call
// fails, and the CO's retry once there is space again must redo the write
// it depends on: after a restart what was created exists and what was
// deleted is gone, listed and charged accordingly, and the data
// directories hold exactly the listed objects' data. Before the fix the
// store's in-memory copy was updated ahead of the disk, the retry
// succeeded from memory without writing, and a restart lost the
// acknowledged volume (or brought a deleted one back).
func TestAcknowledgedStateSurvivesFullDisk(t *testing.T) {
	needRoot(t)
	const capacity = 16 << 20
	dir := shortDir(t, "hpfull")
	state := tmpfsState(t, dir, "32m")
	var failAt atomic.Value // the step at which the disk fills
	failAt.Store("")
	var fill atomic.Value
	fill.Store("")
	opts := driver.Options{StateDir: state, Capacity: capacity, Step: func(step string) {
		if step == failAt.Load().(string) {
			fill.Store(fillDisk(t, state))
		}
	}}
	ctx := context.Background()
	s := serve(t, dir, opts)
	grp := csi.NewGroupControllerClient(s.conn)
	padID := createVol(t, s, "pad", 1<<20, capFor(false, ""), nil)
	padSize := int64(1 << 20)

	// acked runs call with the disk filling at step: it must fail; then,
	// with space again, retried until the journal takes writes, succeed;
	// then the driver restarts. The journal's file must need a new page
	// for the write that fails: the pad's expansions (one 512-byte record
	// each) first bring the log's end to logEnd modulo the page size (a
	// create's reservation, written before step, takes one record).
	acked := func(what, step string, logEnd int64, call func() error) {
		t.Helper()
		for i := 0; journalEnd(t, state)%4096 != logEnd; i++ {
			if i == 8 {
				t.Fatalf("%s: the journal's log ends at %d after 8 one-sector writes, not at %d in a page", what, journalEnd(t, state), logEnd)
			}
			padSize += 4096
			if _, err := s.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: padID,
				CapacityRange: &csi.CapacityRange{RequiredBytes: padSize}}); err != nil {
				t.Fatal(err)
			}
		}
		failAt.Store(step)
		err := call()
		failAt.Store("")
		if c := status.Code(err); c != codes.Unavailable && c != codes.ResourceExhausted && c != codes.Internal {
			t.Fatalf("%s with the disk full at %s: %v, want it to fail", what, step, err)
		}
		if p := fill.Load().(string); p != "" {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			fill.Store("")
		}
		if err := retryUnavailable(call); err != nil {
			t.Fatalf("%s retried with space again: %v", what, err)
		}
		s.stop()
		s = serve(t, dir, opts)
		grp = csi.NewGroupControllerClient(s.conn)
		checkDataMatchesObjects(t, s, state, capacity, what+", restarted")
	}

	// The volume's commit spans several pages: a 64 KiB parameter.
	req := &csi.CreateVolumeRequest{Name: "acked", CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{capFor(false, "")},
		Parameters:         map[string]string{"note": string(bytes.Repeat([]byte{'x'}, 64<<10))}}
	var id string
	acked("CreateVolume", "volume:recorded", journalEnd(t, state)%4096, func() error {
		resp, err := s.ctl.CreateVolume(ctx, req)
		id = resp.GetVolume().GetVolumeId()
		return err
	})
	if ids := listVolumeIDs(t, s); len(ids) != 2 || !slices.Contains(ids, id) {
		t.Fatalf("after a restart ListVolumes has %v, want the acknowledged volume %s (and the pad)", ids, id)
	}
	if again, err := s.ctl.CreateVolume(ctx, req); err != nil || again.GetVolume().GetVolumeId() != id {
		t.Errorf("CreateVolume replayed after a restart: %v, %v; want volume %s", again.GetVolume().GetVolumeId(), err, id)
	}
	if err := os.WriteFile(filepath.Join(volDir(t, s, state, id), "data"), bytes.Repeat([]byte("data"), 1<<18), 0o644); err != nil {
		t.Fatal(err)
	}

	var snapID string
	acked("CreateSnapshot", "snapshot:recorded", 4096-512, func() error {
		resp, err := s.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: id})
		snapID = resp.GetSnapshot().GetSnapshotId()
		return err
	})
	if ids := listSnapshotIDs(t, s); len(ids) != 1 || ids[0] != snapID {
		t.Fatalf("after a restart ListSnapshots has %v, want the acknowledged snapshot %s", ids, snapID)
	}

	var groupID string
	acked("CreateVolumeGroupSnapshot", "group:recorded", 4096-512, func() error {
		resp, err := grp.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "group", SourceVolumeIds: []string{id}})
		groupID = resp.GetGroupSnapshot().GetGroupSnapshotId()
		return err
	})
	if g, err := grp.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: groupID}); err != nil || len(g.GetGroupSnapshot().GetSnapshots()) != 1 {
		t.Fatalf("after a restart the acknowledged group snapshot %s: %v, %v; want it with its member", groupID, g, err)
	}

	acked("DeleteVolumeGroupSnapshot", "group:data-removed", 0, func() error {
		_, err := grp.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: groupID})
		return err
	})
	if _, err := grp.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: groupID}); status.Code(err) != codes.NotFound {
		t.Errorf("after a restart the deleted group snapshot %s: %v, want NotFound", groupID, err)
	}
	acked("DeleteSnapshot", "snapshot:data-removed", 0, func() error {
		_, err := s.ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snapID})
		return err
	})
	if ids := listSnapshotIDs(t, s); len(ids) != 0 {
		t.Errorf("after a restart ListSnapshots has %v, want none", ids)
	}
	acked("DeleteVolume", "volume:data-removed", 0, func() error {
		_, err := s.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
		return err
	})
	if ids := listVolumeIDs(t, s); len(ids) != 1 || ids[0] != padID {
		t.Errorf("after a restart ListVolumes has %v, want only the pad %s: the volume was deleted", ids, padID)
	}
	if got := availableCapacity(t, s); got != capacity-padSize {
		t.Errorf("after a restart GetCapacity offers %d bytes, want %d (the deleted volume counted)", got, capacity-padSize)
	}
}

// retryUnavailable calls fn again, as a CO does, while it answers
// Unavailable (a journal whose write failed refuses writes for a second,
// then recovers), for up to ten seconds.
func retryUnavailable(fn func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := fn()
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// journalEnd is where the journal's log ends: records start at 512-byte
// boundaries and the file after the last is zeros.
func journalEnd(t *testing.T, state string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	last := int64(len(bytes.TrimRight(b, "\x00")))
	return (last + 511) / 512 * 512
}

// listVolumeIDs lists every volume's ID.
func listVolumeIDs(t *testing.T, s *served) []string {
	t.Helper()
	resp, err := s.ctl.ListVolumes(context.Background(), &csi.ListVolumesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range resp.GetEntries() {
		ids = append(ids, e.GetVolume().GetVolumeId())
	}
	return ids
}

// TestSweepReturnsAbandonedReservations: a CreateVolume whose journal
// commit failed keeps its capacity reserved (its retry will need it), so
// GetCapacity offers less; when the CO never retries (the PVC was
// deleted), the sweep removes the volume's data and gives the
// reservation back, and the name is free for a new volume.
func TestSweepReturnsAbandonedReservations(t *testing.T) {
	needRoot(t)
	const capacity = 16 << 20
	dir := shortDir(t, "hpswr")
	state := tmpfsState(t, dir, "32m")
	var fill atomic.Value
	fill.Store("")
	var armed atomic.Bool
	s := serve(t, dir, driver.Options{StateDir: state, Capacity: capacity, Step: func(step string) {
		if step == "volume:recorded" && armed.Load() {
			fill.Store(fillDisk(t, state))
		}
	}})
	ctx := context.Background()
	armed.Store(true)
	_, err := s.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "abandoned", CapacityRange: &csi.CapacityRange{RequiredBytes: 4 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{capFor(false, "")},
		Parameters:         map[string]string{"note": string(bytes.Repeat([]byte{'x'}, 64<<10))}})
	armed.Store(false)
	if c := status.Code(err); c != codes.Unavailable && c != codes.ResourceExhausted {
		t.Fatalf("CreateVolume with the disk full at its commit: %v, want Unavailable or ResourceExhausted", err)
	}
	if err := os.Remove(fill.Load().(string)); err != nil {
		t.Fatal(err)
	}
	if got := availableCapacity(t, s); got != capacity-4<<20 {
		t.Errorf("GetCapacity offers %d after a create whose commit failed, want %d: its retry's capacity stays reserved", got, capacity-4<<20)
	}
	if ids := listVolumeIDs(t, s); len(ids) != 0 {
		t.Errorf("ListVolumes has %v after a create whose commit failed, want none", ids)
	}
	var n int
	if err := retryUnavailable(func() (err error) {
		n, err = s.d.SweepAbandoned(ctx, s.srv.Locks(), time.Nanosecond)
		if err != nil {
			err = status.Error(codes.Unavailable, err.Error()) // the journal recovers within a second
		}
		return err
	}); err != nil || n != 1 {
		t.Fatalf("SweepAbandoned: %d released, %v; want 1", n, err)
	}
	if got := availableCapacity(t, s); got != capacity {
		t.Errorf("GetCapacity offers %d after the sweep, want all %d", got, capacity)
	}
	checkDataMatchesObjects(t, s, state, capacity, "swept")
}

//go:build linux

package driver_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/csitest"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/journal"
)

// TestSweepAbandoned: creates that failed and were never retried leave a
// reservation and possibly data; the sweep removes both, except what is
// young, committed, or still mounted.
func TestSweepAbandoned(t *testing.T) {
	if os.Geteuid() != 0 {
		csitest.Skip(t, "needs root: the driver mounts")
	}
	state := filepath.Join(shortDir(t, "hpsw"), "state") // short: socket paths are limited
	s := serve(t, "", driver.Options{StateDir: state, NodeID: "sweep"})
	ctx, d, srv, ctl := context.Background(), s.d, s.srv, s.ctl
	create := func(name string) string {
		t.Helper()
		var resp *csi.CreateVolumeResponse
		var err error
		for i := 0; i < 100; i++ { // the server may still be starting
			resp, err = ctl.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: name,
				CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}, VolumeCapabilities: []*csi.VolumeCapability{mountCapability()}})
			if err == nil {
				return resp.GetVolume().GetVolumeId()
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("CreateVolume %s: %v", name, err)
		return ""
	}
	kept := create("kept")
	volDir(t, s, state, kept) // made, as by a stage: the sweep must not take it

	j := d.Journal()
	reserve := func(kind journal.Kind, name, id string, leftovers ...string) {
		t.Helper()
		if _, err := j.Reserve(ctx, journal.Reservation{Kind: kind, Name: name, ID: id, Fingerprint: []byte("f")}); err != nil {
			t.Fatal(err)
		}
		for _, p := range leftovers {
			p = filepath.Join(state, p)
			var err error
			if strings.HasSuffix(p, ".img") {
				err = os.WriteFile(p, []byte("half-made"), 0o600)
			} else if err = os.Mkdir(p, 0o750); err == nil {
				err = os.WriteFile(filepath.Join(p, "data"), []byte("half-copied"), 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	reserve(journal.KindVolume, "abandoned", "vol-ab", "volumes/vol-ab", "images/vol-ab.img")
	reserve(journal.KindVolume, "nothing-made", "vol-none")
	reserve(journal.KindSnapshot, "snap", "snap-ab", "snapshots/snap-ab")
	reserve(journal.KindGroupSnapshot, "group", "grp-ab", "snapshots/grp-ab-0.img", "snapshots/grp-ab-1")
	reserve(journal.KindVolume, "mounted", "vol-mnt", "volumes/vol-mnt")
	mnt := filepath.Join(state, "volumes/vol-mnt")
	if err := unix.Mount(mnt, mnt, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	// Reservations made before this sleep are older than the sweep's
	// age, the one after it younger: the margins are wide because a
	// loaded CI machine running -race can take tens of milliseconds
	// between two lines (20 ms failed there).
	time.Sleep(600 * time.Millisecond)
	reserve(journal.KindVolume, "young", "vol-young", "volumes/vol-young")

	n, err := d.SweepAbandoned(ctx, srv.Locks(), 500*time.Millisecond)
	if n != 4 {
		t.Errorf("released %d reservations, want 4 (abandoned, nothing-made, snap, group)", n)
	}
	if err == nil || !strings.Contains(err.Error(), "vol-mnt") {
		t.Errorf("sweep error %v, want one naming the still-mounted vol-mnt", err)
	}
	for _, p := range []string{"volumes/vol-ab", "images/vol-ab.img", "snapshots/snap-ab", "snapshots/grp-ab-0.img", "snapshots/grp-ab-1"} {
		if _, err := os.Lstat(filepath.Join(state, p)); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", p, err)
		}
	}
	for _, p := range []string{"volumes/vol-young/data", "volumes/vol-mnt/data", "volumes/" + kept} {
		if _, err := os.Lstat(filepath.Join(state, p)); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	for name, want := range map[string]bool{"abandoned": false, "nothing-made": false, "young": true, "mounted": true, "kept": true} {
		if _, ok, _ := j.LookupName(ctx, journal.KindVolume, name); ok != want {
			t.Errorf("reservation %q present %v, want %v", name, ok, want)
		}
	}
	// The CO's late retry gets a fresh volume, not the swept ID.
	if id := create("abandoned"); id == "vol-ab" {
		t.Error("a retry after the sweep got the swept ID")
	}
	if id := create("kept"); id != kept {
		t.Errorf("the committed volume's retry got %q, want %q", id, kept)
	}
}

// TestSweepRemovesPartialCopies: a snapshot or group snapshot create
// killed mid-copy leaves fstree.Copy's hidden partial copy
// (".<id>.fstree-partial") beside where the snapshot would be; when the
// create is never retried, the sweep must remove it with the reservation,
// as it removes a complete copy that was never committed.
func TestSweepRemovesPartialCopies(t *testing.T) {
	needRoot(t)
	dir := shortDir(t, "hpswp")
	state := filepath.Join(dir, "state")
	s := serve(t, dir, driver.Options{StateDir: state})
	ctx := context.Background()
	j := s.d.Journal()
	mkTree := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "sub", "file"), []byte("half a copy"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	snaps := filepath.Join(state, "snapshots")
	for _, r := range []struct {
		kind  journal.Kind
		id    string
		trees []string
	}{
		{journal.KindSnapshot, "snap-killed", []string{".snap-killed.fstree-partial"}},
		{journal.KindGroupSnapshot, "group-killed", []string{"group-killed-0", ".group-killed-1.fstree-partial"}},
	} {
		if _, err := j.Reserve(ctx, journal.Reservation{Kind: r.kind, Name: "name-" + r.id, ID: r.id, Fingerprint: []byte("f")}); err != nil {
			t.Fatal(err)
		}
		for _, tree := range r.trees {
			mkTree(filepath.Join(snaps, tree))
		}
	}
	n, err := s.d.SweepAbandoned(ctx, s.srv.Locks(), time.Nanosecond)
	if err != nil || n != 2 {
		t.Fatalf("SweepAbandoned: %d released, %v; want 2", n, err)
	}
	if entries, _ := os.ReadDir(snaps); len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("snapshots directory after the sweep holds %q, want nothing", names)
	}
}

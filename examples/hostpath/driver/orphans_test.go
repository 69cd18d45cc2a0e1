//go:build linux

package driver_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/examples/hostpath/driver"
)

// TestStartRemovesOrphans: reservations are volatile, so the data of a
// create a crash cut short is named by no record; the start removes it
// (TestCrashAtEveryCreateStep kills real creates at each step). Here the
// leftovers are planted, with hostile ones: an orphan directory with a
// mount below it (kept, its mount untouched, the start still succeeds),
// an orphan that is a symlink out of the state directory (the link goes,
// its target stays), a name that is no ID (left alone), and the data
// of committed volumes and snapshots (kept, byte for byte).
func TestStartRemovesOrphans(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	dir := shortDir(t, "hporph")
	state := filepath.Join(dir, "state")
	opts := driver.Options{StateDir: state}
	s := serve(t, dir, opts)
	keep := createVol(t, s, "keep", 1<<20, capFor(false, ""), nil)
	keepBlock := createVol(t, s, "keep-block", 1<<20, capFor(true, ""), nil)
	snap, err := s.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "keep-snap", SourceVolumeId: keep})
	if err != nil {
		t.Fatal(err)
	}
	keepDir := volDir(t, s, state, keep)
	s.stop()
	if err := os.WriteFile(filepath.Join(keepDir, "data"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}

	plant := func(rel string, isDir bool) string {
		p := filepath.Join(state, rel)
		if isDir {
			if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			p = filepath.Join(p, "sub", "f")
		}
		if err := os.WriteFile(p, []byte("orphan"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	orphans := []string{"volumes/orphan-dir", "images/orphan-img.img", "images/orphan-marker.staged",
		"snapshots/orphan-snap", "snapshots/orphan-snap-img.img", "snapshots/.orphan-partial.fstree-partial"}
	for _, rel := range orphans {
		plant(rel, filepath.Ext(rel) == "" || filepath.Ext(rel) == ".fstree-partial")
	}
	noID := "volumes/not an ID"
	plant(noID, true)
	// A symlink out of the state directory, as a tenant who could write
	// there would plant.
	outside := filepath.Join(dir, "outside")
	plant("../outside", true)
	if err := os.Symlink(outside, filepath.Join(state, "volumes", "orphan-link")); err != nil {
		t.Fatal(err)
	}
	// A mount below an orphan directory: a stale bind from a crash.
	mounted := filepath.Join(state, "volumes", "orphan-mounted", "mnt")
	if err := os.MkdirAll(mounted, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mounted, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mounted, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(mounted, "f"), []byte("below a mount"), 0o644); err != nil {
		t.Fatal(err)
	}

	s = serve(t, dir, opts)
	defer s.stop()
	for _, rel := range append(orphans, "volumes/orphan-link") {
		if _, err := os.Lstat(filepath.Join(state, rel)); !os.IsNotExist(err) {
			t.Errorf("orphan %s survived the start (%v)", rel, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "sub", "f")); err != nil {
		t.Errorf("the orphan symlink's target lost its file: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, noID, "sub", "f")); err != nil {
		t.Errorf("%s, no object's name, was touched: %v", noID, err)
	}
	if b, err := os.ReadFile(filepath.Join(mounted, "f")); err != nil || string(b) != "below a mount" {
		t.Errorf("the file below a mount in an orphan: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(state, "volumes", keep, "data")); err != nil || string(b) != "mine" {
		t.Errorf("a committed volume's data: %q, %v", b, err)
	}
	for _, rel := range []string{"images/" + keepBlock + ".img", "snapshots/" + snap.GetSnapshot().GetSnapshotId()} {
		if _, err := os.Stat(filepath.Join(state, rel)); err != nil {
			t.Errorf("committed %s: %v", rel, err)
		}
	}
	if got := listVolumeIDs(t, s); len(got) != 2 {
		t.Errorf("volumes after the start: %v, want the two created", got)
	}
}

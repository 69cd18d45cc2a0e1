//go:build linux

package driver_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/fstree"
)

func volumeSource(id string) *csi.VolumeContentSource {
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}
}

func snapshotSource(id string) *csi.VolumeContentSource {
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: id}}}
}

// hostBytesIn walks a copied tree without following symlinks and reports
// the first regular file holding secret.
func hostBytesIn(t *testing.T, root string, secret []byte) string {
	t.Helper()
	var found string
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || found != "" || !e.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p) // a regular file per Lstat: read it
		if err == nil && bytes.Contains(b, secret) {
			found = p
		}
		return nil
	})
	return found
}

// TestCloneNeverCopiesHostFiles: a tenant swaps the files of its volume
// for symlinks to a host file, and back, as fast as it can, while the
// volume is cloned and snapshotted (and the snapshot restored) again and
// again. No copy may ever hold the host file's bytes: a symlink is copied
// as a symlink, never read through.
func TestCloneNeverCopiesHostFiles(t *testing.T) {
	needRoot(t)
	dir := shortDir(t, "hpsw")
	state := filepath.Join(dir, "state")
	s := serve(t, dir, driver.Options{StateDir: state})
	ctx := context.Background()

	secret := []byte("HOST-SECRET-kubelet-key")
	hostFile := filepath.Join(dir, "host-secret")
	if err := os.WriteFile(hostFile, bytes.Repeat(secret, 64), 0o600); err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	src := createVol(t, s, "tenant", size, capFor(false, ""), nil)
	srcDir := volDir(t, s, state, src)
	const files = 64
	for i := 0; i < files; i++ {
		if err := os.WriteFile(filepath.Join(srcDir, fmt.Sprintf("f%d", i)), []byte("tenant data"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The tenant: swap each file for a symlink to the host file and back,
	// each swap one atomic rename, until told to stop.
	stop := make(chan struct{})
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			f := filepath.Join(srcDir, fmt.Sprintf("f%d", n%files))
			tmp := filepath.Join(srcDir, ".swap")
			os.Remove(tmp)
			if n%2 == 0 {
				if os.Symlink(hostFile, tmp) != nil {
					continue
				}
			} else if os.WriteFile(tmp, []byte("tenant data"), 0o644) != nil {
				continue
			}
			if os.Rename(tmp, f) == nil {
				swaps.Add(1)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	for round := 0; round < 30; round++ {
		clone := createVol(t, s, fmt.Sprintf("clone-%d", round), size, capFor(false, ""), volumeSource(src))
		if p := hostBytesIn(t, filepath.Join(state, "volumes", clone), secret); p != "" {
			t.Fatalf("round %d: the clone holds the host file's bytes at %s", round, p)
		}
		snap, err := s.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: fmt.Sprintf("snap-%d", round), SourceVolumeId: src})
		if err != nil {
			t.Fatal(err)
		}
		sid := snap.GetSnapshot().GetSnapshotId()
		if p := hostBytesIn(t, filepath.Join(state, "snapshots", sid), secret); p != "" {
			t.Fatalf("round %d: the snapshot holds the host file's bytes at %s", round, p)
		}
		restored := createVol(t, s, fmt.Sprintf("restored-%d", round), size, capFor(false, ""), snapshotSource(sid))
		if p := hostBytesIn(t, filepath.Join(state, "volumes", restored), secret); p != "" {
			t.Fatalf("round %d: the restored volume holds the host file's bytes at %s", round, p)
		}
		for _, id := range []string{clone, restored} {
			if _, err := s.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: sid}); err != nil {
			t.Fatal(err)
		}
	}
	if swaps.Load() < 100 {
		t.Errorf("the tenant swapped only %d times: the race was not exercised", swaps.Load())
	}
	if b, err := os.ReadFile(hostFile); err != nil || !bytes.HasPrefix(b, secret) {
		t.Errorf("the host file changed: %v", err)
	}
}

// TestDeleteNeverRemovesThroughMounts: a mount below a directory volume
// (a stale bind from a crash, or one a confused component made) must not
// let DeleteVolume, the ephemeral unpublish or the sweep remove what is
// mounted there: they refuse with FailedPrecondition naming the mount and
// keep the volume, and succeed once it is gone.
func TestDeleteNeverRemovesThroughMounts(t *testing.T) {
	needRoot(t)
	dir := shortDir(t, "hpmb")
	state := filepath.Join(dir, "state")
	s := serve(t, dir, driver.Options{StateDir: state})
	ctx := context.Background()

	// host is what a mount below the volume exposes: it must survive.
	host := filepath.Join(dir, "host")
	if err := os.MkdirAll(filepath.Join(host, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(host, "etc", "precious")
	if err := os.WriteFile(precious, []byte("host data"), 0o600); err != nil {
		t.Fatal(err)
	}
	mountBelow := func(t *testing.T, volDir string) string {
		t.Helper()
		m := filepath.Join(volDir, "deep", "mnt")
		if err := os.MkdirAll(m, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(host, m, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		unmountAtCleanup(t, m)
		return m
	}
	wantRefused := func(t *testing.T, what string, err error, m string) {
		t.Helper()
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), m) {
			t.Errorf("%s with a mount below: got %v, want FailedPrecondition naming %s", what, err, m)
		}
		if _, err := os.Stat(precious); err != nil {
			t.Fatalf("%s removed a file through the mount below the volume: %v", what, err)
		}
	}

	t.Run("DeleteVolume", func(t *testing.T) {
		id := createVol(t, s, "mnt-below", 1<<20, capFor(false, ""), nil)
		m := mountBelow(t, volDir(t, s, state, id))
		_, err := s.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
		wantRefused(t, "DeleteVolume", err, m)
		if _, err := s.ctl.ControllerGetVolume(ctx, &csi.ControllerGetVolumeRequest{VolumeId: id}); err != nil {
			t.Errorf("the volume was forgotten although its data could not be removed: %v", err)
		}
		if err := unix.Unmount(m, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Errorf("DeleteVolume once the mount is gone: %v", err)
		}
		if _, err := os.Lstat(filepath.Join(state, "volumes", id)); !os.IsNotExist(err) {
			t.Errorf("volume directory left after delete: %v", err)
		}
	})

	t.Run("ephemeral unpublish", func(t *testing.T) {
		target := filepath.Join(dir, "eph-target")
		unmountAtCleanup(t, target)
		req := &csi.NodePublishVolumeRequest{VolumeId: "csi-eph-1", TargetPath: target, VolumeCapability: capFor(false, ""),
			VolumeContext: map[string]string{"csi.storage.k8s.io/ephemeral": "true"}}
		if _, err := s.node.NodePublishVolume(ctx, req); err != nil {
			t.Fatal(err)
		}
		m := mountBelow(t, filepath.Join(state, "volumes", "csi-eph-1"))
		_, err := s.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-eph-1", TargetPath: target})
		wantRefused(t, "ephemeral NodeUnpublishVolume", err, m)
		if err := unix.Unmount(m, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "csi-eph-1", TargetPath: target}); err != nil {
			t.Errorf("ephemeral unpublish once the mount is gone: %v", err)
		}
		if _, err := os.Lstat(filepath.Join(state, "volumes", "csi-eph-1")); !os.IsNotExist(err) {
			t.Errorf("ephemeral volume directory left after unpublish: %v", err)
		}
	})
}

// TestCopyIsBoundedByBytesOnDisk: a directory volume's clone or snapshot
// copies data, not holes — a sparse file of 2 GiB with a few KiB in it
// copies as a few KiB (the state directory here is a 64 MiB tmpfs, which
// writing the holes out would fill) — and a copy that would write more
// than the new volume's capacity fails with OutOfRange, whatever the
// source's nominal size says.
func TestCopyIsBoundedByBytesOnDisk(t *testing.T) {
	needRoot(t)
	dir := shortDir(t, "hpsp")
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", state, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(state, unix.MNT_DETACH) })
	s := serve(t, dir, driver.Options{StateDir: state, Capacity: 1 << 40})
	ctx := context.Background()

	src := createVol(t, s, "sparse", 16<<20, capFor(false, ""), nil)
	f, err := os.Create(filepath.Join(volDir(t, s, state, src), "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("data at the end"), 2<<30-100); err != nil {
		t.Fatal(err)
	}
	f.Close()

	clone := createVol(t, s, "clone", 16<<20, capFor(false, ""), volumeSource(src))
	snap, err := s.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap", SourceVolumeId: src})
	if err != nil {
		t.Fatalf("snapshot of a volume holding a sparse file: %v", err)
	}
	for _, p := range []string{filepath.Join(state, "volumes", clone), filepath.Join(state, "snapshots", snap.GetSnapshot().GetSnapshotId())} {
		u, err := fstree.Usage(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if u.Bytes > 1<<20 {
			t.Errorf("%s takes %d bytes on disk: the holes were written out", p, u.Bytes)
		}
		st, err := os.Stat(filepath.Join(p, "sparse"))
		if err != nil || st.Size() != 2<<30-100+15 {
			t.Errorf("copied sparse file: %v, %v, want its size kept", st, err)
		}
	}

	// A volume holding more than a clone's capacity (without quotas
	// nothing stops it) cannot be cloned into that capacity, although its
	// nominal size would fit.
	over := createVol(t, s, "overfull", 1<<20, capFor(false, ""), nil)
	if err := os.WriteFile(filepath.Join(volDir(t, s, state, over), "big"), bytes.Repeat([]byte{1}, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = s.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "too-small",
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 2 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{capFor(false, "")}, VolumeContentSource: volumeSource(over)})
	if status.Code(err) != codes.OutOfRange {
		t.Errorf("cloning 4 MiB of data into a 2 MiB volume: got %v, want OutOfRange", err)
	}
	// Nothing of the failed copy is left, and its capacity is given back.
	entries, _ := os.ReadDir(filepath.Join(state, "volumes"))
	if len(entries) != 3 {
		t.Errorf("volumes directory holds %d entries after a failed clone, want 3 (sparse, clone, overfull)", len(entries))
	}
}

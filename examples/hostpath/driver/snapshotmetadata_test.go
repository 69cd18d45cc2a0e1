//go:build linux

package driver_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/examples/hostpath/driver"
)

// metaServer serves the hostpath driver on a fresh state directory. The
// tests below need no root: they write the volume's image file directly
// (what the loop device does for a staged volume); sanity's SnapshotMetadata
// area drives the same RPCs through real loop devices.
func metaServer(t *testing.T) (state string, conn *grpc.ClientConn) {
	t.Helper()
	state = filepath.Join(shortDir(t, "hpsm"), "state") // short: socket paths are limited
	return state, serve(t, "", driver.Options{StateDir: state, NodeID: "meta"}).conn
}

func blockCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

type ranges [][2]int64

// collect reads a metadata stream to its end.
func collect[M interface {
	GetBlockMetadata() []*csi.BlockMetadata
	GetVolumeCapacityBytes() int64
}](t *testing.T, recv func() (M, error)) (ranges, error) {
	t.Helper()
	var out ranges
	for {
		m, err := recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		for _, b := range m.GetBlockMetadata() {
			out = append(out, [2]int64{b.GetByteOffset(), b.GetSizeBytes()})
		}
	}
}

func covers(rs ranges, off, n int64) bool {
	for _, r := range rs {
		if r[0] <= off && off+n <= r[0]+r[1] {
			return true
		}
	}
	return false
}

func TestHostpathSnapshotMetadata(t *testing.T) {
	state, conn := metaServer(t)
	ctx := context.Background()
	ctl := csi.NewControllerClient(conn)
	sm := csi.NewSnapshotMetadataClient(conn)
	const size = 8 << 20
	var vol *csi.Volume
	for i := 0; ; i++ { // the server may still be starting
		resp, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "meta", CapacityRange: &csi.CapacityRange{RequiredBytes: size},
			VolumeCapabilities: []*csi.VolumeCapability{blockCap()}})
		if err == nil {
			vol = resp.GetVolume()
			break
		}
		if i == 100 {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	img := filepath.Join(state, "images", vol.GetVolumeId()+".img")
	write := func(off int64, b byte) {
		t.Helper()
		f, err := os.OpenFile(img, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 4096)
		for i := range buf {
			buf[i] = b
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	snap := func(name string) string {
		t.Helper()
		resp, err := ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: vol.GetVolumeId()})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetSnapshot().GetSnapshotId()
	}
	allocated := func(req *csi.GetMetadataAllocatedRequest) (ranges, error) {
		st, err := sm.GetMetadataAllocated(ctx, req)
		if err != nil {
			return nil, err
		}
		return collect(t, st.Recv)
	}
	delta := func(base, target string) (ranges, error) {
		st, err := sm.GetMetadataDelta(ctx, &csi.GetMetadataDeltaRequest{BaseSnapshotId: base, TargetSnapshotId: target})
		if err != nil {
			return nil, err
		}
		return collect(t, st.Recv)
	}

	write(0, 1)
	write(1<<20, 2)
	write(6<<20, 3)
	s1 := snap("s1")
	s2 := snap("s2")
	write(3<<20+8192, 4)
	s3 := snap("s3")

	rs, err := allocated(&csi.GetMetadataAllocatedRequest{SnapshotId: s1})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []int64{0, 1 << 20, 6 << 20} {
		if !covers(rs, w, 4096) {
			t.Errorf("allocated %v misses the write at %d", rs, w)
		}
	}
	var total int64
	for _, r := range rs {
		total += r[1]
	}
	if total >= size/2 {
		t.Logf("allocated %d of %d bytes: the state directory's filesystem reports no holes", total, int64(size))
	}
	rs, err = allocated(&csi.GetMetadataAllocatedRequest{SnapshotId: s1, StartingOffset: 2 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) == 0 || rs[0][0]+rs[0][1] <= 2<<20 || !covers(rs, 6<<20, 4096) {
		t.Errorf("from 2 MiB: %v, want ranges ending after it, with the write at 6 MiB", rs)
	}

	if rs, err := delta(s1, s2); err != nil || len(rs) != 0 {
		t.Errorf("delta of identical snapshots: %v, %v; want none", rs, err)
	}
	rs, err = delta(s2, s3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0] != [2]int64{3<<20 + 8192, 4096} {
		t.Errorf("delta after one 4 KiB write at %d: %v, want exactly that block", 3<<20+8192, rs)
	}
	if _, err := delta(s3, s2); status.Code(err) != codes.InvalidArgument {
		t.Errorf("delta with base and target swapped: %v, want InvalidArgument", err)
	}
	if _, err := allocated(&csi.GetMetadataAllocatedRequest{SnapshotId: "no-such-snap"}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown snapshot: %v, want NotFound", err)
	}
	if _, err := allocated(&csi.GetMetadataAllocatedRequest{SnapshotId: "../../etc"}); status.Code(err) != codes.NotFound {
		t.Errorf("path-like snapshot ID: %v, want NotFound", err)
	}
	if _, err := allocated(&csi.GetMetadataAllocatedRequest{SnapshotId: s1, StartingOffset: size + 1}); status.Code(err) != codes.OutOfRange {
		t.Errorf("offset beyond the volume: %v, want OutOfRange", err)
	}

	// A snapshot image swapped for a symlink is not followed.
	simg := filepath.Join(state, "snapshots", s3+".img")
	outside := filepath.Join(t.TempDir(), "outside.img")
	if err := os.WriteFile(outside, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(simg, simg+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, simg); err != nil {
		t.Fatal(err)
	}
	if _, err := allocated(&csi.GetMetadataAllocatedRequest{SnapshotId: s3}); status.Code(err) != codes.Internal {
		t.Errorf("snapshot image replaced by a symlink: %v, want Internal (not followed)", err)
	}
	if err := os.Remove(simg); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(simg+".moved", simg); err != nil {
		t.Fatal(err)
	}
}

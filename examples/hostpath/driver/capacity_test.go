//go:build linux

package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/journal"
)

func availableCapacity(t *testing.T, s *served) int64 {
	t.Helper()
	resp, err := s.ctl.GetCapacity(context.Background(), &csi.GetCapacityRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetAvailableCapacity()
}

// TestCapacityConcurrentClones: clones and creates that run at the same
// time must not together exceed --capacity. Each clone copies a few MiB,
// so they overlap; exactly the number that fit may succeed, the rest fail
// with ResourceExhausted, and deleting them gives all of it back.
func TestCapacityConcurrentClones(t *testing.T) {
	needRoot(t)
	const vol = 8 << 20
	const fit = 2
	dir := shortDir(t, "hpcap")
	s := serve(t, dir, driver.Options{StateDir: filepath.Join(dir, "state"), Capacity: vol * (1 + fit)})
	ctx := context.Background()
	srcID := createVol(t, s, "src", vol, capFor(false, ""), nil)
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(filepath.Join(volDir(t, s, filepath.Join(dir, "state"), srcID), "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}

	const clients = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	var made []string
	exhausted := 0
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			req := &csi.CreateVolumeRequest{Name: fmt.Sprintf("c%d", i),
				CapacityRange:      &csi.CapacityRange{RequiredBytes: vol},
				VolumeCapabilities: []*csi.VolumeCapability{capFor(false, "")}}
			if i%2 == 0 { // half clone (slow), half create empty (fast)
				req.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
					Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: srcID}}}
			}
			for {
				resp, err := s.ctl.CreateVolume(ctx, req)
				mu.Lock()
				switch status.Code(err) {
				case codes.OK:
					made = append(made, resp.GetVolume().GetVolumeId())
				case codes.ResourceExhausted:
					exhausted++
				case codes.Aborted: // the source is busy with another clone: retry as a CO does
					mu.Unlock()
					continue
				default:
					t.Errorf("CreateVolume %s: %v", req.Name, err)
				}
				mu.Unlock()
				return
			}
		}(i)
	}
	wg.Wait()
	if len(made) != fit || exhausted != clients-fit {
		t.Errorf("got %d volumes made and %d ResourceExhausted, want %d and %d (capacity for %d)", len(made), exhausted, fit, clients-fit, fit)
	}
	if got := availableCapacity(t, s); got != max(0, vol*int64(fit-len(made))) {
		t.Errorf("available capacity %d after the creates, want %d", got, max(0, vol*int64(fit-len(made))))
	}
	for _, id := range made {
		if _, err := s.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if got := availableCapacity(t, s); got != vol*fit {
		t.Errorf("available capacity %d after deleting, want %d", got, vol*fit)
	}
}

// TestCapacityExpandConcurrent: expansions of different volumes running
// at the same time cannot together exceed the capacity either.
func TestCapacityExpandConcurrent(t *testing.T) {
	needRoot(t)
	const vol = 8 << 20
	dir := shortDir(t, "hpcx")
	s := serve(t, dir, driver.Options{StateDir: filepath.Join(dir, "state"), Capacity: 4 * vol})
	ctx := context.Background()
	a := createVol(t, s, "a", vol, capFor(true, ""), nil) // block: expansion grows the file
	b := createVol(t, s, "b", vol, capFor(true, ""), nil)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, id := range []string{a, b} {
		wg.Add(1)
		go func(i int, id string) {
			defer wg.Done()
			_, errs[i] = s.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id,
				CapacityRange: &csi.CapacityRange{RequiredBytes: 3 * vol}, VolumeCapability: capFor(true, "")})
		}(i, id)
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch status.Code(err) {
		case codes.OK:
			ok++
		case codes.ResourceExhausted:
		default:
			t.Errorf("ControllerExpandVolume: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d expansions by 16 MiB succeeded with 16 MiB free, want 1", ok)
	}
	if got := availableCapacity(t, s); got != 0 {
		t.Errorf("available capacity %d, want 0", got)
	}
}

// TestCapacityAfterRestart: the accounting is rebuilt from the journal at
// start — committed volumes count, a create that never committed (a crash
// between reserve and commit) does not — and stays exact afterwards.
func TestCapacityAfterRestart(t *testing.T) {
	needRoot(t)
	const vol = 8 << 20
	dir := shortDir(t, "hpcr")
	opts := driver.Options{StateDir: filepath.Join(dir, "state"), Capacity: 4 * vol}
	s := serve(t, dir, opts)
	ctx := context.Background()
	keep := createVol(t, s, "keep", vol, capFor(false, ""), nil)
	createVol(t, s, "block", vol, capFor(true, ""), nil)
	// A create that reserved its name but crashed before committing.
	if _, err := s.d.Journal().Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: "crashed", ID: "vol-crashed", Fingerprint: []byte("f")}); err != nil {
		t.Fatal(err)
	}
	s.stop()

	s = serve(t, dir, opts)
	if got := availableCapacity(t, s); got != 2*vol {
		t.Fatalf("available capacity after restart %d, want %d", got, 2*vol)
	}
	createVol(t, s, "third", 2*vol, capFor(false, ""), nil)
	_, err := s.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "too-much",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 20}, VolumeCapabilities: []*csi.VolumeCapability{capFor(false, "")}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("create beyond capacity: got %v, want ResourceExhausted", err)
	}
	if _, err := s.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: keep}); err != nil {
		t.Fatal(err)
	}
	if got := availableCapacity(t, s); got != vol {
		t.Errorf("available capacity after a delete %d, want %d", got, vol)
	}
}

// TestSnapshotsAreChargedTheirBytesOnDisk: with --capacity 32Mi, the bytes
// a snapshot's data takes on disk are charged to the ledger: GetCapacity
// offers less with each snapshot, a CreateVolume of what it offered before
// them answers ResourceExhausted, a snapshot that does not fit is refused
// with ResourceExhausted, and a snapshot's delete gives its bytes back —
// across a restart too. Before, snapshots held 60 MiB on disk while
// GetCapacity still offered 16 MiB and a CreateVolume of all of it
// succeeded.
func TestSnapshotsAreChargedTheirBytesOnDisk(t *testing.T) {
	needRoot(t)
	const capacity, vol, filled = 32 << 20, 8 << 20, 6 << 20
	dir := shortDir(t, "hpsnc")
	state := tmpfsState(t, dir, "128m")
	opts := driver.Options{StateDir: state, Capacity: capacity}
	s := serve(t, dir, opts)
	ctx := context.Background()
	src := createVol(t, s, "src", vol, capFor(false, ""), nil)
	data := make([]byte, filled)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(volDir(t, s, state, src), "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	before := availableCapacity(t, s)
	if before != capacity-vol {
		t.Fatalf("GetCapacity offers %d with one %d-byte volume, want %d", before, vol, capacity-vol)
	}
	var snaps []string
	for i := 0; i < 3; i++ {
		resp, err := s.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: fmt.Sprintf("snap%d", i), SourceVolumeId: src})
		if err != nil {
			t.Fatalf("snapshot %d: %v", i, err)
		}
		snaps = append(snaps, resp.GetSnapshot().GetSnapshotId())
		got := availableCapacity(t, s)
		if want := before - int64(i+1)*filled; got > want || got < want-int64(i+1)*(64<<10) {
			t.Errorf("GetCapacity offers %d with %d snapshots of %d bytes of data, want %d (less a few blocks each)", got, i+1, filled, want)
		}
	}
	// 6 MiB are left: what was offered before the snapshots no longer fits.
	_, err := s.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "all-offered-before",
		CapacityRange: &csi.CapacityRange{RequiredBytes: before}, VolumeCapabilities: []*csi.VolumeCapability{capFor(false, "")}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("CreateVolume of the %d bytes offered before three snapshots: %v, want ResourceExhausted", before, err)
	}
	// What GetCapacity offers still fits; then a snapshot does not.
	left := availableCapacity(t, s)
	createVol(t, s, "rest", left, capFor(false, ""), nil)
	if got := availableCapacity(t, s); got != 0 {
		t.Errorf("GetCapacity offers %d after a volume of all it offered, want 0", got)
	}
	_, err = s.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "no-room", SourceVolumeId: src})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("CreateSnapshot with no capacity left: %v, want ResourceExhausted", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(state, "snapshots")); len(entries) != len(snaps) {
		t.Errorf("snapshots directory holds %d entries after a refused snapshot, want %d", len(entries), len(snaps))
	}

	// The charges are durable: a restart counts them the same.
	s.stop()
	s = serve(t, dir, opts)
	if got := availableCapacity(t, s); got != 0 {
		t.Errorf("GetCapacity offers %d after a restart, want 0", got)
	}
	if _, err := s.ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snaps[0]}); err != nil {
		t.Fatal(err)
	}
	if got := availableCapacity(t, s); got < filled || got > filled+64<<10 {
		t.Errorf("GetCapacity offers %d after deleting a snapshot of %d bytes, want about that", got, filled)
	}
}

// TestSnapshotsRecordedUnchargedAreMeasuredAtStart: a snapshot whose
// record has no bytes on disk (written before snapshots were charged) is
// measured when the driver starts and charged from then on.
func TestSnapshotsRecordedUnchargedAreMeasuredAtStart(t *testing.T) {
	needRoot(t)
	const capacity, filled = 32 << 20, 4 << 20
	dir := shortDir(t, "hpsnm")
	state := tmpfsState(t, dir, "64m")
	opts := driver.Options{StateDir: state, Capacity: capacity}
	s := serve(t, dir, opts)
	ctx := context.Background()
	src := createVol(t, s, "src", 8<<20, capFor(false, ""), nil)
	if err := os.WriteFile(filepath.Join(volDir(t, s, state, src), "data"), make([]byte, filled), 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := s.ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "old", SourceVolumeId: src})
	if err != nil {
		t.Fatal(err)
	}
	id := x.GetSnapshot().GetSnapshotId()
	charged := availableCapacity(t, s)
	// Rewrite the record as an older version wrote it: no diskBytes.
	kv, err := s.d.Journal().(*journal.File).KV("hostpath/snapshots")
	if err != nil {
		t.Fatal(err)
	}
	raw, ok, err := kv.Get(ctx, id)
	if err != nil || !ok {
		t.Fatalf("snapshot record: %v, %v", ok, err)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if _, ok := rec["diskBytes"]; !ok {
		t.Fatalf("snapshot record %s has no diskBytes", raw)
	}
	delete(rec, "diskBytes")
	if raw, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if err := kv.Put(ctx, id, raw); err != nil {
		t.Fatal(err)
	}
	if got := availableCapacity(t, s); got <= charged {
		t.Fatalf("GetCapacity offers %d with the snapshot's charge removed from its record, want more than %d", got, charged)
	}
	s.stop()
	s = serve(t, dir, opts)
	if got := availableCapacity(t, s); got != charged {
		t.Errorf("GetCapacity offers %d after a restart, want %d: the snapshot measured and charged again", got, charged)
	}
}

// BenchmarkGetCapacity is GetCapacity with 1,000 volumes and 1,000
// snapshots recorded: the ledger's durable charges are a running total
// (journal.KV.Watch), so the call costs the same at any number of records.
func BenchmarkGetCapacity(b *testing.B) {
	needRoot(b)
	dir := shortDir(b, "hpbgc")
	s := serve(b, dir, driver.Options{StateDir: filepath.Join(dir, "state"), Capacity: 1 << 50})
	fj := s.d.Journal().(*journal.File)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for _, space := range []string{"hostpath/volumes", "hostpath/snapshots"} {
				kv, err := fj.KV(space)
				if err != nil {
					b.Error(err)
					return
				}
				for i := w; i < 1000; i += 8 {
					id := fmt.Sprintf("bench-%04d", i)
					rec := fmt.Sprintf(`{"id":%q,"name":%q,"capacity":1048576,"kind":"directory","sourceId":"x","size":1048576,"diskBytes":4096,"created":"2026-01-01T00:00:00Z"}`, id, id)
					if err := kv.Put(ctx, id, []byte(rec)); err != nil {
						b.Error(err)
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	want := int64(1<<50) - 1000*(1<<20) - 1000*4096
	b.ResetTimer()
	for b.Loop() {
		resp, err := s.ctl.GetCapacity(ctx, &csi.GetCapacityRequest{})
		if err != nil || resp.GetAvailableCapacity() != want {
			b.Fatalf("GetCapacity: %v, %v; want %d", resp.GetAvailableCapacity(), err, want)
		}
	}
}

// TestEncryptedVolumesChargeTheirHeader: an encrypted volume's backing
// file holds its capacity plus the LUKS2 header (crypt.HeaderBytes), so
// the file system gets all the capacity asked; the ledger charges that
// footprint, at create, expansion and after a restart, so GetCapacity
// offers what the disk can still hold. Before, the header was not
// charged: with room for three volumes and two headers, a third
// encrypted volume was accepted whose data did not fit.
func TestEncryptedVolumesChargeTheirHeader(t *testing.T) {
	needRoot(t)
	const vol = 8 << 20
	const header = crypt.HeaderBytes
	dir := shortDir(t, "hpenc-cap")
	opts := driver.Options{StateDir: filepath.Join(dir, "state"), Capacity: 3*vol + 2*header}
	s := serve(t, dir, opts)
	ctx := context.Background()
	create := func(name string, block bool) (string, error) {
		c := capFor(block, "")
		params := map[string]string{driver.ParamEncrypted: "true"}
		if !block {
			c, params[driver.ParamFSType] = capFor(false, "ext4"), "ext4"
		}
		resp, err := s.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, Parameters: params,
			CapacityRange: &csi.CapacityRange{RequiredBytes: vol}, VolumeCapabilities: []*csi.VolumeCapability{c}})
		return resp.GetVolume().GetVolumeId(), err
	}
	blockID, err := create("enc-block", true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := availableCapacity(t, s), int64(2*vol+header); got != want {
		t.Fatalf("after one encrypted %d-byte volume, available %d; want %d (its header charged)", vol, got, want)
	}
	fi, err := os.Stat(filepath.Join(opts.StateDir, "images", blockID+".img"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != vol+header {
		t.Fatalf("the backing file holds %d bytes; want %d (capacity and header)", fi.Size(), vol+header)
	}
	fsID, err := create("enc-fs", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := create("enc-third", true); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a third encrypted volume with %d bytes left: %v; want ResourceExhausted", availableCapacity(t, s), err)
	}
	s.stop()

	s = serve(t, dir, opts) // the charges are rebuilt from the records
	if got := availableCapacity(t, s); got != vol {
		t.Fatalf("after a restart, available %d; want %d", got, vol)
	}
	if _, err := s.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: blockID,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * vol}}); err != nil {
		t.Fatal(err)
	}
	if got := availableCapacity(t, s); got != 0 {
		t.Fatalf("after growing the encrypted volume by %d, available %d; want 0", vol, got)
	}
	if _, err := s.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: fsID}); err != nil {
		t.Fatal(err)
	}
	if got := availableCapacity(t, s); got != vol+header {
		t.Fatalf("after deleting an encrypted volume, available %d; want %d (capacity and header back)", got, vol+header)
	}
}

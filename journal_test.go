package csikit_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/journal"
)

// idDriver creates volumes under the journal's reserved ID, as the
// idempotency package asks drivers to.
func idDriver(t *testing.T) *ctrlDriver {
	return &ctrlDriver{create: func(ctx context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
		id, ok := journal.ReservedID(ctx)
		if !ok {
			t.Errorf("CreateVolume(%q): no reserved ID in the context", r.GetName())
			id = "vol-unreserved"
		}
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id, CapacityBytes: r.GetCapacityRange().GetRequiredBytes()}}, nil
	}}
}

func TestJournalMakesCreateIdempotent(t *testing.T) {
	j, err := journal.OpenFile(filepath.Join(t.TempDir(), "journal.db"), journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	d := idDriver(t)
	s := serve(t, d, csikit.Options{Journal: j})
	ctx := context.Background()

	first, err := s.controller().CreateVolume(ctx, newCreate("pvc-1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.controller().CreateVolume(ctx, newCreate("pvc-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := again.GetVolume().GetVolumeId(), first.GetVolume().GetVolumeId(); got != want {
		t.Fatalf("retry of the same name: got volume %q, want %q", got, want)
	}
	other := newCreate("pvc-1")
	other.CapacityRange.RequiredBytes *= 2
	_, err = s.controller().CreateVolume(ctx, other)
	testenv.WantCode(t, err, codes.AlreadyExists)

	if _, err := s.controller().DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: first.GetVolume().GetVolumeId()}); err != nil {
		t.Fatal(err)
	}
	fresh, err := s.controller().CreateVolume(ctx, other)
	if err != nil {
		t.Fatalf("create after delete released the name: %v", err)
	}
	if fresh.GetVolume().GetVolumeId() == first.GetVolume().GetVolumeId() {
		t.Errorf("a new volume after delete reused the old ID %q", fresh.GetVolume().GetVolumeId())
	}
}

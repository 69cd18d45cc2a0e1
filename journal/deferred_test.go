package journal_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/idempotency"

	"github.com/csikit/csikit/journal"
)

func kvGet(t *testing.T, kv *journal.KV, key string) (string, bool) {
	t.Helper()
	var v string
	var ok bool
	if err := kv.ForEach(func(k string, val []byte) error {
		if k == key {
			v, ok = string(val), true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return v, ok
}

func openJournalKV(t *testing.T, path string) (*journal.File, *journal.KV) {
	t.Helper()
	j, err := journal.OpenFile(path, journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := j.KV("meta")
	if err != nil {
		t.Fatal(err)
	}
	return j, kv
}

// TestDeferredWritesJoinCommitAndRelease: a driver's DeferPut in
// CreateVolume and DeferDelete in DeleteVolume land in the journal's own
// transactions (reserve + commit, release: three records for the whole
// create/delete), are durable when the call returns, and survive a reopen.
func TestDeferredWritesJoinCommitAndRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, kv := openJournalKV(t, path)
	ic := newIC(t, idempotency.Options{Journal: j})
	ctx := context.Background()

	before := journal.FileRecords(j)
	id := volID(t, ic, createVol("pvc-1"), func(ctx context.Context, req any) (any, error) {
		id, _ := journal.ReservedID(ctx)
		if err := kv.DeferPut(ctx, id, []byte("size=1")); err != nil {
			return nil, err
		}
		if _, ok := kvGet(t, kv, id); ok {
			t.Error("a deferred write is visible before it is durable")
		}
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id}}, nil
	})
	if got := journal.FileRecords(j) - before; got != 2 {
		t.Errorf("create wrote %d records, want 2 (reserve, commit + metadata)", got)
	}
	if v, ok := kvGet(t, kv, id); !ok || v != "size=1" {
		t.Fatalf("after CreateVolume the metadata is %q, %v", v, ok)
	}
	j.Close()
	j, kv = openJournalKV(t, path)
	defer j.Close()
	if v, ok := kvGet(t, kv, id); !ok || v != "size=1" {
		t.Fatalf("after reopen the metadata is %q, %v", v, ok)
	}
	ic = newIC(t, idempotency.Options{Journal: j})
	before = journal.FileRecords(j)
	if _, err := call(ctx, ic, mDelete, &csi.DeleteVolumeRequest{VolumeId: id}, func(ctx context.Context, req any) (any, error) {
		return &csi.DeleteVolumeResponse{}, kv.DeferDelete(ctx, id)
	}); err != nil {
		t.Fatal(err)
	}
	if got := journal.FileRecords(j) - before; got != 1 {
		t.Errorf("delete wrote %d records, want 1 (release + metadata)", got)
	}
	if _, ok := kvGet(t, kv, id); ok {
		t.Fatal("after DeleteVolume the metadata is still there")
	}
	if err := j.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestDeferredWritesSurviveEveryEnding: whatever the call's outcome, what
// the driver deferred is durable when the call returns.
func TestDeferredWritesSurviveEveryEnding(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		method string
		req    any
		result func(ctx context.Context, id string) (any, error)
	}{
		"create refused (reservation dropped)": {mCreate, createVol("a"), func(context.Context, string) (any, error) {
			return nil, status.Error(codes.OutOfRange, "too big")
		}},
		"create failed (reservation kept)": {mCreate, createVol("b"), func(context.Context, string) (any, error) {
			return nil, status.Error(codes.Internal, "backend down")
		}},
		"delete of an ID the journal never saw": {mDelete, &csi.DeleteVolumeRequest{VolumeId: "unknown"}, func(context.Context, string) (any, error) {
			return &csi.DeleteVolumeResponse{}, nil
		}},
		"delete failed": {mDelete, &csi.DeleteVolumeRequest{VolumeId: "unknown"}, func(context.Context, string) (any, error) {
			return nil, status.Error(codes.FailedPrecondition, "has snapshots")
		}},
		"commit refused (driver returned another volume's ID)": {mCreate, createVol("c"), func(context.Context, string) (any, error) {
			return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "taken-id"}}, nil
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal")
			j, kv := openJournalKV(t, path)
			defer j.Close()
			// "taken-id" belongs to another name already.
			if _, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: "other", ID: "taken-id", Fingerprint: []byte("f")}); err != nil {
				t.Fatal(err)
			}
			ic := newIC(t, idempotency.Options{Journal: j})
			_, _ = call(ctx, ic, c.method, c.req, func(ctx context.Context, req any) (any, error) {
				if err := kv.DeferPut(ctx, "k", []byte("v")); err != nil {
					t.Fatal(err)
				}
				id, _ := journal.ReservedID(ctx)
				return c.result(ctx, id)
			})
			if v, ok := kvGet(t, kv, "k"); !ok || v != "v" {
				t.Fatalf("deferred write after the call: %q, %v", v, ok)
			}
			if err := j.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDeferredAndImmediateWritesKeepCallOrder: a Put after a DeferPut of
// the same key wins, and a deferred delete after a deferred put deletes.
func TestDeferredAndImmediateWritesKeepCallOrder(t *testing.T) {
	j, kv := openJournalKV(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	ic := newIC(t, idempotency.Options{Journal: j})
	volID(t, ic, createVol("pvc"), func(ctx context.Context, req any) (any, error) {
		id, _ := journal.ReservedID(ctx)
		steps := []error{
			kv.DeferPut(ctx, "x", []byte("deferred")),
			kv.Put(ctx, "x", []byte("immediate")),
			kv.DeferPut(ctx, "y", []byte("1")),
			kv.DeferDelete(ctx, "y"),
			kv.DeferDelete(ctx, "z"),
			kv.DeferPut(ctx, "z", []byte("last")),
		}
		for _, err := range steps {
			if err != nil {
				return nil, err
			}
		}
		if v, _ := kvGet(t, kv, "x"); v != "immediate" {
			t.Errorf("Put did not take the earlier deferred write with it in order: x = %q", v)
		}
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id}}, nil
	})
	want := map[string]string{"x": "immediate", "z": "last"}
	got := map[string]string{}
	kv.ForEach(func(k string, v []byte) error { got[k] = string(v); return nil })
	if len(got) != len(want) || got["x"] != want["x"] || got["z"] != want["z"] {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestDeferOutsideAJournaledCallIsPut: with no interceptor around it a
// deferred write is made at once.
func TestDeferOutsideAJournaledCallIsPut(t *testing.T) {
	j, kv := openJournalKV(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	if err := kv.DeferPut(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if v, ok := kvGet(t, kv, "k"); !ok || v != "v" {
		t.Fatalf("got %q, %v", v, ok)
	}
	if err := kv.DeferDelete(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if _, ok := kvGet(t, kv, "k"); ok {
		t.Fatal("DeferDelete outside a call did not delete")
	}
	if err := kv.DeferPut(context.Background(), "", nil); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty key: %v", err)
	}
}

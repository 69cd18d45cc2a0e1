package journal_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/idempotency"

	"github.com/csikit/csikit/journal"
)

func mustGet(t *testing.T, ctx context.Context, kv *journal.KV, key string) (string, bool) {
	t.Helper()
	v, ok, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

// TestKVGetReadsTheCallsOwnDeferredWrites: within a journaled call, Get
// with the call's ctx returns what the call deferred; any other reader
// sees the durable value until the call has made its writes durable.
func TestKVGetReadsTheCallsOwnDeferredWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, kv := openJournalKV(t, path)
	defer j.Close()
	bg := context.Background()
	for k, v := range map[string]string{"old": "durable", "gone": "durable"} {
		if err := kv.Put(bg, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	if v, ok := mustGet(t, bg, kv, "old"); !ok || v != "durable" {
		t.Fatalf("Get outside a call: %q, %v", v, ok)
	}
	if _, ok := mustGet(t, bg, kv, "missing"); ok {
		t.Fatal("Get of a missing key found it")
	}
	ic := newIC(t, idempotency.Options{Journal: j})
	volID(t, ic, createVol("pvc"), func(ctx context.Context, req any) (any, error) {
		id, _ := journal.ReservedID(ctx)
		for _, err := range []error{
			kv.DeferPut(ctx, "new", []byte("1")),
			kv.DeferPut(ctx, "new", []byte("2")),
			kv.DeferPut(ctx, "old", []byte("replaced")),
			kv.DeferDelete(ctx, "gone"),
		} {
			if err != nil {
				return nil, err
			}
		}
		for key, want := range map[string]string{"new": "2", "old": "replaced"} {
			if v, ok := mustGet(t, ctx, kv, key); !ok || v != want {
				t.Errorf("in the call, Get(%s) = %q, %v; want the deferred %q", key, v, ok, want)
			}
		}
		if v, ok := mustGet(t, ctx, kv, "gone"); ok {
			t.Errorf("in the call, Get(gone) = %q after DeferDelete", v)
		}
		// Not durable yet: other readers see the file's state.
		if v, _ := mustGet(t, bg, kv, "old"); v != "durable" {
			t.Errorf("another reader sees %q before the commit", v)
		}
		if _, ok := mustGet(t, bg, kv, "new"); ok {
			t.Error("another reader sees a deferred write before the commit")
		}
		// The copy Get returns is the caller's.
		v, _, _ := kv.Get(ctx, "new")
		v[0] = 'X'
		if v, _ := mustGet(t, ctx, kv, "new"); v != "2" {
			t.Errorf("modifying Get's result changed the deferred value to %q", v)
		}
		return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: id}}, nil
	})
	for key, want := range map[string]string{"new": "2", "old": "replaced"} {
		if v, ok := mustGet(t, bg, kv, key); !ok || v != want {
			t.Errorf("after the call Get(%s) = %q, %v; want %q", key, v, ok, want)
		}
	}
	if _, ok := mustGet(t, bg, kv, "gone"); ok {
		t.Error("after the call the deferred delete is not applied")
	}
	if _, _, err := kv.Get(bg, ""); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Get of an empty key: %v", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, _, err := kv.Get(ctx, "old"); status.Code(err) != codes.Canceled {
		t.Errorf("Get with a cancelled context: %v", err)
	}
}

// TestKVSizeLimitsFailTheCallNotTheJournal: a value over MaxKVValue, or
// deferred writes over MaxDeferred, fail at the call that makes them, with
// a code and a message; the journal stays healthy and keeps working.
func TestKVSizeLimitsFailTheCallNotTheJournal(t *testing.T) {
	j, kv := openJournalKV(t, filepath.Join(t.TempDir(), "journal"))
	defer j.Close()
	bg := context.Background()
	big := bytes.Repeat([]byte("v"), journal.MaxKVValue+1)
	for name, write := range map[string]func(context.Context, string, []byte) error{"Put": kv.Put, "DeferPut": kv.DeferPut} {
		if err := write(bg, "big", big); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s of %d bytes: %v, want InvalidArgument", name, len(big), err)
		}
	}
	ic := newIC(t, idempotency.Options{Journal: j})
	chunk := big[:journal.MaxKVValue]
	_, err := call(bg, ic, mCreate, createVol("pvc"), func(ctx context.Context, req any) (any, error) {
		if err := kv.DeferPut(ctx, "a", chunk); err != nil {
			t.Fatalf("first 16 MiB: %v", err)
		}
		if err := kv.DeferPut(ctx, "b", chunk[:journal.MaxKVValue/2]); err != nil {
			t.Fatalf("next 8 MiB: %v", err)
		}
		err := kv.DeferPut(ctx, "c", chunk)
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("deferring past MaxDeferred: %v, want ResourceExhausted", err)
		}
		// Put still works: it writes the deferred ones first.
		if err := kv.Put(ctx, "c", chunk); err != nil {
			t.Errorf("Put after a refused DeferPut: %v", err)
		}
		return nil, err
	})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("call: %v", err)
	}
	if err := j.Err(); err != nil {
		t.Fatalf("a refused write made the journal unhealthy: %v", err)
	}
	for _, k := range []string{"a", "b", "c"} {
		if _, ok := mustGet(t, bg, kv, k); !ok {
			t.Errorf("%s not written", k)
		}
	}
	// The journal's own records have limits too: a response no record
	// holds is refused at Commit.
	if _, err := j.Reserve(bg, journal.Reservation{Kind: journal.KindVolume, Name: "n", ID: "i", Fingerprint: []byte("f")}); err != nil {
		t.Fatal(err)
	}
	if err := j.Commit(bg, journal.KindVolume, "n", "i", make([]byte, 65<<20)); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("Commit of a 65 MiB response: %v, want ResourceExhausted", err)
	}
	if err := j.Err(); err != nil {
		t.Fatalf("journal unhealthy after refusals: %v", err)
	}
	if err := kv.Put(bg, "after", []byte("ok")); err != nil {
		t.Fatal(err)
	}
	if err := j.Check(); err != nil {
		t.Fatal(err)
	}
}

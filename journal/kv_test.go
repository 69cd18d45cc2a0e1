package journal_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/journal"
)

func TestKVSurvivesReopenAndSharesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := journal.OpenFile(path, journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := j.KV("volumes")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := kv.Put(ctx, fmt.Sprintf("v%02d", i), []byte(fmt.Sprint(i))); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	if err := kv.Delete(ctx, "v07"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "missing"); err != nil {
		t.Fatalf("Delete of a missing key: %v", err)
	}
	// The journal keeps working beside the KV space.
	if _, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: "v07", Fingerprint: []byte("f"), ID: "id-1"}); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	j, err = journal.OpenFile(path, journal.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	kv, err = j.KV("volumes")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if err := kv.ForEach(func(k string, v []byte) error { got[k] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 63 || got["v63"] != "63" || got["v07"] != "" {
		t.Fatalf("after reopen: got %d keys (v63=%q, v07=%q), want 63 with v07 deleted", len(got), got["v63"], got["v07"])
	}
	if rec, ok, err := j.LookupName(ctx, journal.KindVolume, "v07"); err != nil || !ok || rec.ID != "id-1" {
		t.Fatalf("journal record beside the KV space: got %+v, %v, %v", rec, ok, err)
	}
	other, err := j.KV("snapshots")
	if err != nil {
		t.Fatal(err)
	}
	if !kv.Has("v63") || kv.Has("v07") || other.Has("v63") {
		t.Errorf("Has: v63 %v (want true), deleted v07 %v, v63 in another space %v (want false)", kv.Has("v63"), kv.Has("v07"), other.Has("v63"))
	}
	n := 0
	other.ForEach(func(string, []byte) error { n++; return nil })
	if n != 0 {
		t.Fatalf("a new space holds %d keys, want 0 (spaces are separate)", n)
	}
	if _, err := j.KV(""); status.Code(err) != codes.InvalidArgument {
		t.Errorf("KV(\"\"): got %v, want InvalidArgument", err)
	}
	if err := kv.Put(ctx, "", nil); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Put with an empty key: got %v, want InvalidArgument", err)
	}
}

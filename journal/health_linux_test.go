package journal_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/internal/testenv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/journal"
)

// TestFileJournalErrReportsPoisonAndRecovery: after a failed write the
// journal says so (FailedPrecondition) and refuses writes; a later write
// recovers it without a restart; nothing acknowledged is lost.
func TestFileJournalErrReportsPoisonAndRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal")
	j, kv := openJournalKV(t, path)
	ctx := context.Background()
	var h journal.HealthReporter = j // what csikit's Server asks
	if err := h.Err(); err != nil {
		t.Fatalf("fresh journal: %v", err)
	}
	if _, err := j.Reserve(ctx, journal.Reservation{Kind: journal.KindVolume, Name: "pvc-1", ID: "vol-1", Fingerprint: []byte("f")}); err != nil {
		t.Fatal(err)
	}
	if err := kv.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	testenv.BreakWrites(t, path)
	if err := kv.Put(ctx, "k", []byte("v2")); err == nil {
		t.Fatal("write through a broken descriptor succeeded")
	}
	err := h.Err()
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "bad file descriptor") {
		t.Fatalf("after a failed write Err = %v, want FailedPrecondition naming the failure", err)
	}
	if v, _, _ := kv.Get(ctx, "k"); string(v) != "v1" {
		t.Fatalf("the failed write is visible: %q", v)
	}
	time.Sleep(1100 * time.Millisecond) // File retries after a second
	if err := kv.Put(ctx, "k", []byte("v3")); err != nil {
		t.Fatalf("write after the pause did not recover the journal: %v", err)
	}
	if err := h.Err(); err != nil {
		t.Fatalf("after recovery Err = %v", err)
	}
	if err := j.Check(); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if err := h.Err(); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("closed journal: Err = %v, want FailedPrecondition", err)
	}
	j, kv = openJournalKV(t, path)
	defer j.Close()
	if v, _, _ := kv.Get(ctx, "k"); string(v) != "v3" {
		t.Fatalf("after reopen k = %q, want v3", v)
	}
	if rec, ok, err := j.LookupName(ctx, journal.KindVolume, "pvc-1"); err != nil || !ok || rec.ID != "vol-1" {
		t.Fatalf("reservation lost: %v %v %v", rec, ok, err)
	}
}

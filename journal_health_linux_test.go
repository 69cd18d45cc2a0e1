package csikit_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/idempotency"
)

// breakJournalWrites replaces the process's descriptor for path by a
// read-only one: every later write to the file fails (EBADF), as on a
// dying disk.
func breakJournalWrites(t *testing.T, path string) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == path {
			if fd, _ := strconv.Atoi(e.Name()); fd != int(ro.Fd()) {
				if err := unix.Dup3(int(ro.Fd()), fd, unix.O_CLOEXEC); err != nil {
					t.Fatal(err)
				}
				return
			}
		}
	}
	t.Fatalf("no open descriptor for %s", path)
}

// TestProbeAndMetricReportAPoisonedJournal: once the journal file fails a
// write, Probe answers FAILED_PRECONDITION (the spec's "plugin not
// healthy") and csikit_journal_healthy drops to 0; after the journal
// recovers on a later write both are healthy again, and the volume created
// before the failure is still known.
func TestProbeAndMetricReportAPoisonedJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := idempotency.OpenFileJournal(path, idempotency.FileJournalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	reg := prometheus.NewPedanticRegistry()
	s := serve(t, idDriver(t), csikit.Options{Name: "journal.csikit.dev", Journal: j, Registry: reg})
	ctx := context.Background()
	healthy := func() float64 {
		t.Helper()
		n, err := testutil.GatherAndCount(reg, "csikit_journal_healthy")
		if err != nil || n != 1 {
			t.Fatalf("csikit_journal_healthy: %d series, %v", n, err)
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "csikit_journal_healthy" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return -1
	}

	first, err := s.controller().CreateVolume(ctx, newCreate("pvc-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.identity().Probe(ctx, &csi.ProbeRequest{}); err != nil {
		t.Fatalf("Probe of a healthy server: %v", err)
	}
	if v := healthy(); v != 1 {
		t.Fatalf("csikit_journal_healthy = %v on a healthy journal", v)
	}

	breakJournalWrites(t, path)
	if _, err := s.controller().CreateVolume(ctx, newCreate("pvc-2")); err == nil {
		t.Fatal("CreateVolume succeeded although the journal cannot write")
	}
	_, err = s.identity().Probe(ctx, &csi.ProbeRequest{})
	wantCode(t, err, codes.FailedPrecondition)
	if !strings.Contains(err.Error(), "bad file descriptor") {
		t.Errorf("Probe error does not name the failure: %v", err)
	}
	if _, err := s.srv.Probe(ctx, &csi.ProbeRequest{}); err == nil {
		t.Error("Server.Probe (for /healthz) answers healthy")
	}
	if v := healthy(); v != 0 {
		t.Fatalf("csikit_journal_healthy = %v on a poisoned journal", v)
	}

	time.Sleep(1100 * time.Millisecond) // the journal retries after a second
	if _, err := s.controller().CreateVolume(ctx, newCreate("pvc-2")); err != nil {
		t.Fatalf("CreateVolume after the pause did not recover the journal: %v", err)
	}
	if _, err := s.identity().Probe(ctx, &csi.ProbeRequest{}); err != nil {
		t.Fatalf("Probe after recovery: %v", err)
	}
	if v := healthy(); v != 1 {
		t.Fatalf("csikit_journal_healthy = %v after recovery", v)
	}
	again, err := s.controller().CreateVolume(ctx, newCreate("pvc-1"))
	if err != nil || again.GetVolume().GetVolumeId() != first.GetVolume().GetVolumeId() {
		t.Fatalf("retry of pvc-1 after recovery: %v, %v; want volume %q", again, err, first.GetVolume().GetVolumeId())
	}
}

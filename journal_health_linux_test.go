package csikit_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/internal/testenv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/journal"
)

// TestProbeAndMetricReportAPoisonedJournal: once the journal file fails a
// write, Probe answers FAILED_PRECONDITION (the spec's "plugin not
// healthy") and csikit_journal_healthy drops to 0; after the journal
// recovers on a later write both are healthy again, and the volume created
// before the failure is still known.
func TestProbeAndMetricReportAPoisonedJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := journal.OpenFile(path, journal.FileOptions{})
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

	testenv.BreakWrites(t, path)
	if _, err := s.controller().CreateVolume(ctx, newCreate("pvc-2")); err == nil {
		t.Fatal("CreateVolume succeeded although the journal cannot write")
	}
	_, err = s.identity().Probe(ctx, &csi.ProbeRequest{})
	testenv.WantCode(t, err, codes.FailedPrecondition)
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

//go:build linux

package sanity_test

import (
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/sanity"
)

// refTarget serves a refDriver with fault on a state directory that
// survives restarts, logging to log.
func refTarget(t *testing.T, fault string, log *sanity.LogBuffer) sanity.Target {
	return refTargetAt(t.TempDir(), fault, log)
}

// refTargetAt is refTarget on the state directory dir, whose backend
// objects refObjects(dir) lists.
func refTargetAt(dir, fault string, log *sanity.LogBuffer) sanity.Target {
	var out io.Writer = log
	if fault == "silent_log" {
		out = io.Discard
	}
	logger := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return sanity.Restartable(func() (any, csikit.Options, error) {
		return newRefDriver(dir, logger, fault), csikit.Options{
			Name: "ref.sanity.csikit.dev", Version: "v1.0.0", NodeID: "node-1",
			Clone: true, Logger: logger, VolumeModes: csikit.Mount | csikit.Block,
		}, nil
	})
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Skip(t, "needs root: the reference driver bind-mounts volumes")
	}
}

// TestReference runs the whole harness against the reference driver,
// which must pass every case it does not skip.
func TestReference(t *testing.T) {
	needRoot(t)
	log := &sanity.LogBuffer{}
	start := time.Now()
	dir := t.TempDir()
	sanity.Run(t, refTargetAt(dir, "", log), sanity.Config{Log: log.Bytes, AccessType: sanity.BothAccess, BackendObjects: refObjects(dir)})
	t.Logf("harness against the reference driver took %v", time.Since(start))
}

// TestDriverServingLess: a driver that refuses an fs_type or a mount flag
// it does not serve with INVALID_ARGUMENT, before looking at what is
// staged or published, passes the conflicting-repeat cases (which picked
// such a capability and demanded ALREADY_EXISTS): the harness accepts
// INVALID_ARGUMENT where a fresh volume is refused the same capability.
func TestDriverServingLess(t *testing.T) {
	needRoot(t)
	for _, variant := range []string{"own_fs_only", "no_noexec"} {
		t.Run(variant, func(t *testing.T) {
			log := &sanity.LogBuffer{}
			sanity.Run(t, refTarget(t, variant, log), sanity.Config{Areas: sanity.Identity | sanity.Controller | sanity.Node, Log: log.Bytes})
		})
	}
}

// TestSkip runs the Identity area against a driver whose Probe hangs, with
// the Probe cases skipped through Config.Skip: the test fails unless the
// skip takes effect.
func TestSkip(t *testing.T) {
	log := &sanity.LogBuffer{}
	sanity.Run(t, refTarget(t, "hang", log), sanity.Config{
		Areas:       sanity.Identity,
		CallTimeout: time.Second,
		Skip:        map[string]string{"Identity/Probe/": "this driver's Probe hangs on purpose"},
	})
}

// TestSecretLogsSkip: a driver that logs nothing fails SecretLogs (see
// the silent_log fault) unless Config.Skip lists the case with a reason.
func TestSecretLogsSkip(t *testing.T) {
	log := &sanity.LogBuffer{}
	sanity.Run(t, refTarget(t, "silent_log", log), sanity.Config{
		Areas: sanity.Identity | sanity.SecretLogs,
		Log:   log.Bytes,
		Skip:  map[string]string{"SecretLogs/no_secret_in_log": "this driver's log goes to a collector the test cannot read"},
	})
}

package sanity

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/goleak"
)

// Run tests target against the CSI spec as configured by cfg, as plain
// subtests of t: Identity once, then, for each access type of
// cfg.AccessType, the Controller, Snapshots, Expansion, Modify, Node,
// GroupController, SnapshotMetadata, DataPath, Pagination, Concurrency and Restart areas
// (and Encryption, with Config.Encryption; SplitBrain, with
// Config.SplitBrain), then SecretLogs and Hygiene over the whole run. With
// Config.BackendObjects set, every case (and group) also fails that leaves
// an object in the driver's backend. Run returns when every
// case has finished and the in-process driver, if any, has stopped; it
// logs a tally of its cases last ("sanity: N passed, N failed, N
// skipped", shown by go test -v or when the test fails).
func Run(t *testing.T, target Target, cfg Config) {
	t.Helper()
	cfg = cfg.withDefaults()
	var leakOpts []goleak.Option
	if target.start != nil && cfg.Areas&Hygiene != 0 {
		leakOpts = append(leakOpts, goleak.IgnoreCurrent())
		for _, f := range cfg.IgnoreGoroutines {
			leakOpts = append(leakOpts, goleak.IgnoreTopFunction(f))
		}
	}
	if cfg.BaseDir == "" {
		cfg.BaseDir = t.TempDir()
	}
	in, err := target.launch(&cfg)
	if err != nil {
		t.Fatalf("sanity: starting the target: %v", err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			if err := in.close(); err != nil {
				t.Errorf("sanity: stopping the target: %v", err)
			}
		}
	}
	defer stop()
	if cfg.Log == nil && in.log != nil {
		cfg.Log = in.log.Bytes
	}
	s := &suite{
		cfg: cfg, in: in, base: cfg.BaseDir, runID: randomHex(4), seq: new(atomic.Int64),
		id: csi.NewIdentityClient(in.conn), ctl: csi.NewControllerClient(in.conn),
		node: csi.NewNodeClient(in.conn), grp: csi.NewGroupControllerClient(in.conn),
		access: MountAccess, root: t.Name(), vols: &volumeLog{}, tally: &tally{},
	}
	if cfg.AccessType == BlockAccess {
		s.access = BlockAccess
	}
	var atStart map[string]bool
	var atStartErr error
	if cfg.BackendObjects != nil {
		s.leaks = &leakCheck{list: cfg.BackendObjects, timeout: cfg.CallTimeout}
		atStart, atStartErr = s.leaks.snapshot()
	}
	s.discover(t)

	area := func(a Area, name string, f func(*testing.T, *suite), s *suite) {
		if cfg.Areas&a != 0 {
			s.run(t, name, func(t *testing.T) { f(t, s) })
		}
	}
	area(Identity, "Identity", identityCases, s)
	for _, a := range []AccessType{MountAccess, BlockAccess} {
		if cfg.AccessType&a == 0 {
			continue
		}
		ts := s.with(a)
		ts.run(t, accessName(a), func(t *testing.T) {
			area := func(ar Area, name string, f func(*testing.T, *suite)) {
				if cfg.Areas&ar != 0 {
					ts.run(t, name, func(t *testing.T) { f(t, ts) })
				}
			}
			area(Controller, "Controller", controllerCases)
			area(Snapshots, "Snapshots", snapshotCases)
			area(Expansion, "Expansion", expansionCases)
			area(Modify, "Modify", modifyCases)
			area(Node, "Node", nodeCases)
			area(GroupController, "GroupController", groupCases)
			area(SnapshotMetadata, "SnapshotMetadata", snapshotMetadataCases)
			area(DataPath, "DataPath", dataPathCases)
			area(Pagination, "Pagination", paginationCases)
			area(Concurrency, "Concurrency", concurrencyCases)
			area(Restart, "Restart", restartCases)
			if cfg.Encryption != nil {
				area(Encryption, "Encryption", encryptionCases)
			}
			if cfg.SplitBrain != nil {
				area(SplitBrain, "SplitBrain", splitBrainCases)
			}
		})
	}
	area(SecretLogs, "SecretLogs", secretLogCases, s)

	if cfg.Areas&Hygiene != 0 {
		s.run(t, "Hygiene", func(t *testing.T) {
			s.run(t, "no_mounts_left", func(t *testing.T) {
				mps, err := mountsUnder(cfg.BaseDir)
				if err != nil {
					t.Fatalf("reading /proc/self/mountinfo: %v", err)
				}
				if len(mps) > 0 {
					t.Errorf("got mounts left under %s after the run: %s, want none", cfg.BaseDir, strings.Join(mps, ", "))
					for _, mp := range mps {
						_ = detach(mp)
					}
				}
			})
			s.run(t, "no_backend_objects_left", func(t *testing.T) { s.runLeaksCase(t, atStart, atStartErr) })
			s.run(t, "no_goroutines_leaked", func(t *testing.T) {
				if target.start == nil {
					t.Skip("goroutines are checked for in-process targets only")
				}
				stop()
				if err := goleak.Find(leakOpts...); err != nil {
					t.Errorf("got goroutines still running after the driver stopped, want none (set Config.IgnoreGoroutines for deliberate ones): %v", err)
				}
			})
		})
	}
	t.Logf("sanity: %s", s.tally)
}

// accessName names the subtree of an access type.
func accessName(a AccessType) string {
	if a == BlockAccess {
		return "block"
	}
	return "mount"
}

// logRule and errorRule are what SecretLogs holds drivers to.
var (
	logRule   = rule("Logging", "plugins SHOULD NOT write potentially sensitive data to logs (e.g. secrets)")
	errorRule = kube("Events", "a driver's error messages are shown in the Events of the PVC or pod and in sidecar logs, so a secret in one is readable by anyone who can read the namespace") +
		"; " + rule("Secrets Requirements", "secrets are sensitive and MUST be treated as such (not logged, etc.) by the CO, which logs and records these messages")
)

// noLogHelp says how to hand the harness the driver's log.
const noLogHelp = `set Config.Log to a func returning everything the driver has logged so far ` +
	`(its log file, or the stderr of the process you started); run the driver at its most verbose level, ` +
	`where requests are logged; in-process targets whose Options.Logger is nil are captured by the harness. ` +
	`If the driver's log cannot be had, list "SecretLogs/no_secret_in_log" in Config.Skip with the reason`

// secretLogCases checks that no secret value, raw or escaped, reached the
// driver's log or an error message the driver returned.
func secretLogCases(t *testing.T, s *suite) {
	s.run(t, "no_secret_in_errors", func(t *testing.T) {
		for _, r := range s.in.errs.records() {
			for _, l := range findSecrets([]byte(r.msg), s.cfg.Secrets) {
				t.Errorf("got the value of %s in the %s error answering %s, want secrets in no error message\n\trule: %s", l, r.code, r.method, errorRule)
			}
		}
	})
	s.run(t, "no_secret_in_log", func(t *testing.T) {
		if s.cfg.Log == nil {
			t.Fatalf("got no driver log to search for secrets, want one: %s", noLogHelp)
		}
		log, err := s.cfg.Log()
		if err != nil {
			t.Fatalf("reading the driver log: %v", err)
		}
		if len(log) == 0 {
			t.Fatalf("got an empty driver log after the whole run, want the driver's log to search for secrets: %s", noLogHelp)
		}
		for _, l := range findSecrets(log, s.cfg.Secrets) {
			t.Errorf("got the value of %s in the driver log, want it nowhere (a log must show secret keys at most)\n\trule: %s", l, logRule)
		}
	})
}

//go:build linux

package sanity_test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/sanity"
)

// faults are deliberate bugs of the reference driver, each with the case
// (relative to the Run) meant to catch it.
var faults = []struct {
	fault, catches string
}{
	{"wrong_code", "mount/Controller/DeleteVolume/unknown_id"},
	{"duplicate_on_retry", "mount/Controller/CreateVolume/same_name_same_request"},
	{"leaked_mount", "mount/Node/NodeUnpublishVolume/removes_target_path"},
	{"secret_logged", "SecretLogs/no_secret_in_log"},
	{"secret_in_error", "SecretLogs/no_secret_in_errors"},
	{"broken_pagination", "mount/Pagination/ListVolumes/every_entry_once"},
	{"lost_data", "mount/DataPath/survives_republish"},
	{"forget_on_restart", "mount/Restart/CreateVolume/retry_after_restart"},
	{"ignores_readonly", "mount/DataPath/readonly_publish_refuses_writes"},
	{"hang", "Identity/Probe/ready_or_failed_precondition"},
	{"delete_staged", "block/Concurrency/racing_publish_unpublish_delete"},
	{"leaked_goroutine", "Hygiene/no_goroutines_leaked"},
	{"publish_unstaged", "mount/Node/NodePublishVolume/missing_staging_path"},
}

// selftestSecret is the secret the fault runs send; it must never appear
// in the harness's output, whatever the driver does with it.
const selftestSecret = "selftest-secret-value-7f3a"

// faultEnv names the fault TestFaultHelper injects; only the faults test
// sets it, in the child process it starts.
const faultEnv = "SANITY_SELFTEST_FAULT"

// TestFaultHelper runs the harness against the reference driver with the
// fault named by $SANITY_SELFTEST_FAULT. It only runs as the child of
// TestFaults, which expects it to fail.
func TestFaultHelper(t *testing.T) {
	fault := os.Getenv(faultEnv)
	if fault == "" {
		t.Skip("run by TestFaults in a child process")
	}
	cfg := sanity.Config{AccessType: sanity.BothAccess, Secrets: map[string]string{"selftest-key": selftestSecret}}
	if fault == "hang" {
		cfg.CallTimeout = time.Second
	}
	if _, ok := proxyFaults[fault]; ok {
		cfg.AccessType, cfg.Areas = sanity.MountAccess, sanity.Controller|sanity.Node
		sanity.Run(t, proxyTarget(t, fault), cfg)
		return
	}
	log := newSyncLog()
	cfg.Log = log.Bytes
	sanity.Run(t, refTarget(t, fault, log), cfg)
}

// TestFaults checks that every fault of the table is caught by the case
// meant to catch it: the harness runs against the broken driver in a
// child process (a failing subtest cannot be observed in-process without
// failing this test) and the case must be among the failures.
func TestFaults(t *testing.T) {
	needRoot(t)
	if testing.Short() {
		t.Skip("starts one child test process per fault")
	}
	failLine := regexp.MustCompile(`--- FAIL: TestFaultHelper/(\S+)`)
	for _, f := range faults {
		t.Run(f.fault, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestFaultHelper$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), faultEnv+"="+f.fault)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			if err == nil {
				t.Fatalf("harness passed against fault %s, want case %s to fail\n%s", f.fault, f.catches, out.String())
			}
			var failed []string
			for _, m := range failLine.FindAllStringSubmatch(out.String(), -1) {
				failed = append(failed, m[1])
			}
			found := false
			for _, c := range failed {
				if c == f.catches {
					found = true
				}
			}
			if !found {
				t.Fatalf("fault %s: got failures %v, want %s among them\n%s", f.fault, failed, f.catches, out.String())
			}
			if strings.Contains(out.String(), selftestSecret) {
				t.Errorf("fault %s: the harness printed the secret value in its output, want it stripped", f.fault)
			}
			if f.fault == "wrong_code" {
				// What a vendor reads: RPC, code received, stripped
				// request, spec rule.
				for _, want := range []string{
					`DeleteVolume: got NotFound`, `want OK`, `request: {"volume_id":"sanity-missing-volume-`,
					`"secrets":{"selftest-key":"***stripped***"}`, `rule: CSI v1.14 DeleteVolume: a volume that does not exist counts as deleted → OK`,
				} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("fault %s: failure output lacks %q:\n%s", f.fault, want, out.String())
					}
				}
			}
			if strings.Contains(out.String(), "panic:") {
				t.Errorf("fault %s: the harness panicked:\n%s", f.fault, out.String())
			}
			t.Logf("fault %s caught by %s (all failures: %s)", f.fault, f.catches, strings.Join(failed, " "))
		})
	}
}

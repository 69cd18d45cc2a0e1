//go:build linux

package sanity_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/sanity"
)

// faults are deliberate bugs of the reference driver, each with the case
// (relative to the Run) meant to catch it and the other cases that may
// fail with it because they meet the same bug (a name ending in "/" is a
// group); any other failing case is a false alarm of the harness and fails
// the fault's test.
var faults = []struct {
	fault, catches string
	also           []string
}{
	{fault: "wrong_code", catches: "mount/Controller/DeleteVolume/unknown_id", also: []string{"mount/Controller/DeleteVolume/twice", "block/Controller/DeleteVolume/"}},
	{fault: "duplicate_on_retry", catches: "mount/Controller/CreateVolume/same_name_same_request", also: []string{
		"mount/Controller/CreateVolume/same_name_different_capacity", "mount/Concurrency/CreateVolume/same_name_one_volume", "mount/Restart/CreateVolume/retry_after_restart",
		"block/Controller/CreateVolume/", "block/Concurrency/CreateVolume/same_name_one_volume", "block/Restart/CreateVolume/retry_after_restart"}},
	// Every case that unpublishes meets the leaked mount.
	{fault: "leaked_mount", catches: "mount/Node/NodeUnpublishVolume/removes_target_path", also: []string{
		"mount/Node/", "mount/DataPath/", "mount/Concurrency/", "mount/Restart/", "block/Node/", "block/DataPath/", "block/Concurrency/", "block/Restart/"}},
	{fault: "secret_logged", catches: "SecretLogs/no_secret_in_log"},
	{fault: "secret_in_error", catches: "SecretLogs/no_secret_in_errors"},
	{fault: "broken_pagination", catches: "mount/Pagination/ListVolumes/every_entry_once", also: []string{"mount/Pagination/ListSnapshots/every_entry_once", "block/Pagination/"}},
	{fault: "lost_data", catches: "mount/DataPath/survives_republish", also: []string{"mount/DataPath/snapshot_content", "mount/DataPath/clone_content"}},
	{fault: "forget_on_restart", catches: "mount/Restart/CreateVolume/retry_after_restart", also: []string{"block/Restart/CreateVolume/retry_after_restart"}},
	{fault: "ignores_readonly", catches: "mount/DataPath/readonly_publish_refuses_writes"},
	{fault: "hang", catches: "Identity/Probe/ready_or_failed_precondition"},
	{fault: "delete_staged", catches: "block/Concurrency/racing_publish_unpublish_delete", also: []string{"block/Node/NodeStageVolume/delete_while_staged"}},
	{fault: "leaked_goroutine", catches: "Hygiene/no_goroutines_leaked"},
	{fault: "publish_unstaged", catches: "mount/Node/NodePublishVolume/missing_staging_path"},
	// Issue 16: block stats of the wrong device, mount stats of the
	// requested size instead of the filesystem.
	{fault: "stats_wrong_device", catches: "block/Node/NodeGetVolumeStats/published_volume"},
	{fault: "stats_requested_size", catches: "mount/Node/NodeGetVolumeStats/published_volume"},
	// Used bytes that never move (three tries, so a shared filesystem's
	// noise cannot hide or fake it).
	{fault: "stats_frozen_used", catches: "mount/DataPath/stats_track_writes"},
	// Publish binds an empty, never staged staging directory.
	{fault: "publish_unstaged_dir", catches: "mount/Node/NodePublishVolume/not_staged"},
	// Conflicting repeats answered OK; a second volume on a staging path
	// in use answered OK.
	{fault: "restage_ignores_flags", catches: "mount/Node/NodeStageVolume/conflicting_mount_flags"},
	{fault: "restage_ignores_fs_type", catches: "mount/Node/NodeStageVolume/conflicting_fs_type"},
	{fault: "republish_ignores_flags", catches: "mount/Node/NodePublishVolume/conflicting_mount_flags"},
	{fault: "stage_path_reuse", catches: "mount/Node/NodeStageVolume/staging_path_in_use"},
	// A stage that fails on a mount flag after mounting leaves the mount
	// and the staged mark (so DeleteVolume refuses).
	{fault: "stage_residue", catches: "mount/Node/NodeStageVolume/rejected_mount_flag_leaves_nothing"},
	// Secrets that only show escaped: %q-formatted in the JSON log, and
	// %q-formatted in an error message.
	{fault: "secret_logged_escaped", catches: "SecretLogs/no_secret_in_log"},
	{fault: "secret_in_error_escaped", catches: "SecretLogs/no_secret_in_errors"},
	// The driver logs nothing at all: the secret check cannot look, and
	// says so by failing.
	{fault: "silent_log", catches: "SecretLogs/no_secret_in_log"},
	// Issue 24: DeleteVolume of one kind of volume (mount, longest name)
	// leaves it in a trash directory; an object left before the first
	// case.
	{fault: "backend_leak", catches: "mount/Controller/CreateVolume/max_length_name"},
	{fault: "backend_leak_outside_case", catches: "Hygiene/no_backend_objects_left"},
}

// selftestSecret and selftestEscaped are the secrets the fault runs send;
// they must never appear in the harness's output, whatever the driver
// does with them. The second one changes under every escaping (quotes, a
// backslash, a newline, non-ASCII); its token marks it in any form.
const (
	selftestSecret  = "selftest-secret-value-7f3a"
	selftestToken   = "c0ffee42d00d"
	selftestEscaped = `selftest "quoted" back\slash` + "\nline two ünïcødé " + selftestToken
)

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
	cfg := sanity.Config{AccessType: sanity.BothAccess, Secrets: map[string]string{"selftest-key": selftestSecret, "selftest-escaped": selftestEscaped}}
	if fault == "hang" {
		cfg.CallTimeout = time.Second
	}
	log := &sanity.LogBuffer{}
	cfg.Log = log.Bytes
	if _, ok := proxyFaults[fault]; ok {
		cfg.AccessType, cfg.Areas = sanity.MountAccess, sanity.Controller|sanity.Snapshots|sanity.Node|sanity.SecretLogs
		sanity.Run(t, proxyTarget(t, fault, log), cfg)
		return
	}
	dir := t.TempDir()
	// A faulty driver can leave loop devices behind (leaked_mount: its
	// unstage cannot detach a device still bound onto a leaked target);
	// once the harness has removed the leaked mounts, they go, before the
	// directory of their backing files.
	t.Cleanup(func() { detachLoopsUnder(t, dir) })
	cfg.BackendObjects = refObjects(dir)
	sanity.Run(t, refTargetAt(dir, fault, log), cfg)
}

// detachLoopsUnder detaches every loop device whose backing file is below
// dir, found through sysfs (no ioctl on other devices).
func detachLoopsUnder(t *testing.T, dir string) {
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(b)), dir+"/") {
			continue
		}
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(f)))
		if err := block.DetachLoop(context.Background(), dev); err != nil {
			t.Errorf("detaching %s, left by the faulty driver: %v", dev, err)
		}
	}
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
			leaves := leafFailures(failed)
			// The tally counts each failed case (not the groups above it).
			tallyLine := regexp.MustCompile(`sanity: (\d+) passed, (\d+) failed, (\d+) skipped`).FindStringSubmatch(out.String())
			if tallyLine == nil || tallyLine[2] != strconv.Itoa(len(leaves)) || tallyLine[1] == "0" {
				t.Errorf("fault %s: tally %q, want \"sanity: N passed, %d failed, N skipped\" with N > 0 passed", f.fault, tallyLine, len(leaves))
			}
			if !slices.Contains(leaves, f.catches) {
				t.Fatalf("fault %s: got failures %v, want %s among them\n%s", f.fault, leaves, f.catches, out.String())
			}
			for _, c := range leaves {
				if c != f.catches && !slices.ContainsFunc(f.also, func(a string) bool { return a == c || strings.HasSuffix(a, "/") && strings.HasPrefix(c, a) }) {
					t.Errorf("fault %s: case %s failed too, want only %s (and %v): a false alarm or a case the fault's table entry must name\n%s",
						f.fault, c, f.catches, f.also, out.String())
				}
			}
			if strings.Contains(out.String(), selftestSecret) || strings.Contains(out.String(), selftestToken) {
				t.Errorf("fault %s: the harness printed the secret value in its output, want it stripped", f.fault)
			}
			if f.fault == "wrong_code" {
				// What a vendor reads: RPC, code received, stripped
				// request, spec rule.
				for _, want := range []string{
					`DeleteVolume: got NotFound`, `want OK`, `request: {"volume_id":"sanity-missing-volume-`,
					`"selftest-key":"***stripped***"`, `rule: CSI v1.14 DeleteVolume: a volume that does not exist counts as deleted → OK`,
				} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("fault %s: failure output lacks %q:\n%s", f.fault, want, out.String())
					}
				}
			}
			if strings.Contains(out.String(), "panic:") {
				t.Errorf("fault %s: the harness panicked:\n%s", f.fault, out.String())
			}
			switch f.fault {
			case "backend_leak":
				// The vendor reads which object, in which case, and why.
				for _, want := range []string{`got 1 backend object(s) left by the case after its cleanup deleted what it created: "trash/v`,
					`rule: CSI v1.14 DeleteVolume/DeleteSnapshot:`} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("fault %s: failure output lacks %q:\n%s", f.fault, want, out.String())
					}
				}
			case "backend_leak_outside_case":
				if !strings.Contains(out.String(), `that no case left (created outside the cases`) || !strings.Contains(out.String(), `"trash/stray"`) {
					t.Errorf("fault %s: the failure does not name the stray object:\n%s", f.fault, out.String())
				}
			case "lost_data":
				// Issue 16 item 7: persistence is Kubernetes' expectation
				// of a persistent volume, not spec text.
				if !strings.Contains(out.String(), "rule: Kubernetes PersistentVolume:") || strings.Contains(out.String(), "CSI v1.14 NodePublishVolume: a volume's data persists") {
					t.Errorf("fault %s: the failure cites the spec for Kubernetes' expectation:\n%s", f.fault, out.String())
				}
			case "silent_log":
				if !strings.Contains(out.String(), "set Config.Log to a func returning everything the driver has logged") {
					t.Errorf("fault %s: the failure does not say how to hand the harness the log:\n%s", f.fault, out.String())
				}
			}
			t.Logf("fault %s caught by %s (all failures: %s)", f.fault, f.catches, strings.Join(leaves, " "))
		})
	}
}

// leafFailures drops the groups from a list of failed test names: a name
// that another failed name is below only failed because of it.
func leafFailures(failed []string) []string {
	var out []string
	for _, f := range failed {
		leaf := true
		for _, g := range failed {
			if strings.HasPrefix(g, f+"/") {
				leaf = false
				break
			}
		}
		if leaf && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

//go:build linux

package main_test

import (
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/csikit/csikit/internal/testenv"
)

// scriptedDriver is a driver binary started and restarted by a shell
// script, as csikit sanity's --restart-command does it for a driver
// deployed outside a Go test; it logs to a file (--driver-log).
type scriptedDriver struct {
	endpoint, log, script string
}

// startScripted writes the start/restart script for bin with args and
// the environment variables env (NAME=VALUE), runs it once and stops the
// driver when the test ends (by the PID the script recorded).
func startScripted(t *testing.T, env []string, bin string, args ...string) scriptedDriver {
	t.Helper()
	dir, err := os.MkdirTemp("", "scripted")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "csi.sock")
	d := scriptedDriver{endpoint: "unix://" + sock, log: filepath.Join(dir, "driver.log"), script: filepath.Join(dir, "restart.sh")}
	var quoted []string
	for _, e := range env {
		quoted = append(quoted, strconv.Quote(e))
	}
	quoted = append(quoted, strconv.Quote(bin), "--endpoint", strconv.Quote(d.endpoint))
	for _, a := range args {
		quoted = append(quoted, strconv.Quote(a))
	}
	script := fmt.Sprintf(`#!/bin/sh
# Stops the driver (SIGTERM, by the PID recorded at its start) and starts it again.
pidfile=%[1]q
if [ -f "$pidfile" ]; then
	pid=$(cat "$pidfile")
	kill "$pid" 2>/dev/null
	i=0
	while state=$(awk '{print $3}' /proc/"$pid"/stat 2>/dev/null) && [ -n "$state" ] && [ "$state" != Z ] && [ $i -lt 300 ]; do
		sleep 0.1; i=$((i+1))
	done
fi
rm -f %[2]q
env %[3]s >>%[4]q 2>&1 </dev/null &
echo $! >"$pidfile"
`, filepath.Join(dir, "pid"), sock, strings.Join(quoted, " "), d.log)
	if err := os.WriteFile(d.script, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGTERM)
				for i := 0; i < 300 && syscall.Kill(pid, 0) == nil && !zombie(pid); i++ {
					time.Sleep(100 * time.Millisecond)
				}
			}
		}
		os.RemoveAll(dir)
	})
	if out, err := exec.Command("sh", d.script).CombinedOutput(); err != nil {
		t.Fatalf("starting %s: %v\n%s", bin, err, out)
	}
	for i := 0; ; i++ {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if i == 300 {
			b, _ := os.ReadFile(d.log)
			t.Fatalf("%s did not serve within 30s:\n%s", bin, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return d
}

// zombie reports whether pid has exited but was not reaped yet.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// junitReport is what the tests read back from --junit.
type junitReport struct {
	Suites []struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Skipped  int `xml:"skipped,attr"`
		Cases    []struct {
			Class   string `xml:"classname,attr"`
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func readJUnit(t *testing.T, path string) (junitReport, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r junitReport
	if err := xml.Unmarshal(b, &r); err != nil {
		t.Fatalf("the JUnit report is not XML: %v\n%s", err, b)
	}
	if len(r.Suites) != 1 {
		t.Fatalf("got %d test suites, want 1", len(r.Suites))
	}
	return r, string(b)
}

var tallyLine = regexp.MustCompile(`csikit sanity \S+: (\d+) passed, (\d+) failed, (\d+) skipped`)

// tally returns the counts csikit sanity printed.
func tally(t *testing.T, r result) (pass, fail, skip int) {
	t.Helper()
	m := tallyLine.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no tally in the output:\n%s\n%s", r.stdout, r.stderr)
	}
	pass, _ = strconv.Atoi(m[1])
	fail, _ = strconv.Atoi(m[2])
	skip, _ = strconv.Atoi(m[3])
	return pass, fail, skip
}

// TestSanityHostpath runs every area against the hostpath binary with
// its log searched for the hostile secrets and restarts through a script,
// and reads the JUnit report back.
func TestSanityHostpath(t *testing.T) {
	testenv.RequireRoot(t, "examples/hostpath mounts volumes")
	d := startScripted(t, nil, binary(t, "github.com/csikit/csikit/examples/hostpath"),
		"--nodeid", "sanity-node", "--state-dir", t.TempDir(), "--log-level", "debug", "--enable-attach", "--enable-modify", "--mutable-parameters", "iops")
	junit := filepath.Join(t.TempDir(), "report.xml")
	cfg := filepath.Join(t.TempDir(), "sanity.yaml")
	// Options beat the file: the file's volumeSize is overridden.
	if err := os.WriteFile(cfg, []byte(`volumeSize: 1Gi
expandSize: 32Mi
areas: [all]
skip:
  mount/DataPath/expansion_visible_on_node: "directory volumes show the host filesystem's size without project quotas, which this kernel lacks"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := csikit(t, "sanity", d.endpoint, "--config", cfg, "--volume-size", "16Mi", "--driver-log", d.log,
		"--restart-command", "sh "+d.script, "--mutable-param", "iops=100", "--secrets-file", secretsFile(t), "--junit", junit)
	t.Logf("csikit sanity against hostpath:\n%s", r.stdout[strings.LastIndex(r.stdout, "\ncsikit sanity"):])
	r.want(t, 0)
	noSecrets(t, r.stdout+r.stderr)
	pass, fail, skip := tally(t, r)
	if pass < 100 || fail != 0 {
		t.Errorf("got %d passed, %d failed, want over 100 passed and none failed", pass, fail)
	}
	for _, c := range []string{"PASS  mount/Restart/CreateVolume/retry_after_restart", "PASS  SecretLogs/no_secret_in_log", "PASS  mount/Controller/CreateVolume/with_capacity"} {
		if !strings.Contains(r.stdout, c) {
			t.Errorf("got no %q in the output", c)
		}
	}
	rep, raw := readJUnit(t, junit)
	noSecrets(t, raw)
	s := rep.Suites[0]
	if s.Tests != pass+fail+skip || s.Failures != 0 || s.Skipped != skip || len(s.Cases) != s.Tests {
		t.Errorf("got JUnit tests=%d failures=%d skipped=%d with %d cases, want %d, 0, %d", s.Tests, s.Failures, s.Skipped, len(s.Cases), pass+fail+skip, skip)
	}
}

// TestSanityTmpfs runs the harness against the tmpfs binary with defaults
// (no log, no restart: those cases skip, with the reason).
func TestSanityTmpfs(t *testing.T) {
	p := tmpfs(t)
	r := csikit(t, "sanity", p.Endpoint, "--volume-size", "8Mi", "--expand-size", "16Mi").want(t, 0)
	for _, s := range []string{"SKIP  SecretLogs/no_secret_in_log: Config.Skip: no --driver-log FILE given", "SKIP  mount/Restart: no Config.Restart hook"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("got no %q in the output:\n%s", s, r.stdout)
		}
	}
	if pass, fail, _ := tally(t, r); pass < 50 || fail != 0 {
		t.Errorf("got %d passed, %d failed, want over 50 passed and none failed", pass, fail)
	}
}

// TestSanityFindsPlantedBugs: against the planted driver the node cases
// fail, the run exits 1, and the JUnit report carries the failures with
// the rule broken.
func TestSanityFindsPlantedBugs(t *testing.T) {
	ep := servePlanted(t)
	junit := filepath.Join(t.TempDir(), "report.xml")
	r := csikit(t, "sanity", ep, "--areas", "Identity,Node", "--junit", junit, "--quiet").want(t, 1)
	if strings.Contains(r.stdout, "PASS  ") {
		t.Errorf("--quiet printed passing cases:\n%s", r.stdout)
	}
	_, fail, _ := tally(t, r)
	rep, _ := readJUnit(t, junit)
	if fail == 0 || rep.Suites[0].Failures != fail {
		t.Fatalf("got %d failures printed, %d in JUnit; want the same, above 0\n%s", fail, rep.Suites[0].Failures, r.stdout)
	}
	found := false
	for _, c := range rep.Suites[0].Cases {
		if c.Failure != nil && strings.Contains(c.Failure.Body, "rule: CSI v1.14") {
			found = true
		}
	}
	if !found {
		t.Errorf("no JUnit failure quotes the rule it broke:\n%s", r.stdout)
	}
}

// TestSanityUnreachable: a driver that does not serve fails the run with
// the harness's reason.
func TestSanityUnreachable(t *testing.T) {
	r := csikit(t, "sanity", "unix:///nonexistent/csi.sock", "--call-timeout", "1s").want(t, 1)
	if !strings.Contains(r.stderr, "csikit: sanity: starting the target: sanity: connecting to the driver: driver not ready") {
		t.Errorf("got stderr %q, want the reason the run failed", r.stderr)
	}
}

// TestSanityBadConfig: bad configuration is refused before any case runs.
func TestSanityBadConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(cfg, []byte("volumeSise: 1Gi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", cfg}, `unknown field "volumeSise"`},
		{[]string{"--areas", "Identity,Nodes"}, `no area "Nodes"`},
		{[]string{"--access-type", "file"}, `access type "file"`},
		{[]string{"--volume-size", "lots"}, "want a positive size"},
		{[]string{"--unsupported-access-modes", "RWX"}, `no access mode "RWX"`},
		{[]string{"--call-timeout", "5"}, "call timeout"},
	} {
		r := csikit(t, append([]string{"sanity", "unix:///nonexistent.sock"}, c.args...)...).want(t, 2)
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: got stderr %q, want %q", c.args, r.stderr, c.want)
		}
	}
}

//go:build linux

package main_test

import (
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// noVolumesLeft fails the test if the driver at ep lists any volume.
func noVolumesLeft(t *testing.T, ep string) {
	t.Helper()
	if list := csikit(t, "call", ep, "Controller.ListVolumes").want(t, 0).object(t); len(list) != 0 {
		t.Errorf("the bench left volumes behind: %v", list)
	}
}

func TestBenchCreateDelete(t *testing.T) {
	p := hostpath(t)
	r := csikit(t, "bench", "--clients", "3", "--duration", "1s", "--rounds", "2", "one="+p.Endpoint, "two="+p.Endpoint).want(t, 0)
	// Every round runs every endpoint, in turn, and each did some cycles.
	rounds := regexp.MustCompile(`(?m)^round (\d)  (one|two) +(\d+\.\d) ops/s  p50 \S+ +p99 \S+ +max \S+$`).FindAllStringSubmatch(r.stdout, -1)
	if len(rounds) != 4 || rounds[0][1]+rounds[0][2] != "1one" || rounds[1][1]+rounds[1][2] != "1two" || rounds[3][1]+rounds[3][2] != "2two" {
		t.Fatalf("want rounds 1 and 2 of one and two, in that order; got:\n%s", r.stdout)
	}
	for _, m := range rounds {
		if m[3] == "0.0" {
			t.Errorf("round %s of %s completed no cycle:\n%s", m[1], m[2], r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "median of the rounds:\n  one ") || !regexp.MustCompile(`\n  two .*\(\d+\.\d\d× the rate of one\)\n`).MatchString(r.stdout) {
		t.Errorf("no summary comparing two with one:\n%s", r.stdout)
	}
	noVolumesLeft(t, p.Endpoint)

	// Block volumes, parameters.
	csikit(t, "bench", "--block", "--clients", "1", "--duration", "100ms", "--rounds", "1", p.Endpoint).want(t, 0)
	noVolumesLeft(t, p.Endpoint)
}

// TestBenchFailedCall: the first error ends the bench with the method,
// the code and the driver's message, and no volume is left behind by the
// clients that were mid-cycle.
func TestBenchFailedCall(t *testing.T) {
	p := hostpath(t)
	r := csikit(t, "bench", "--parameter", "encrypted=maybe", "--clients", "4", "--duration", "1s", p.Endpoint).want(t, 1)
	if !strings.Contains(r.stderr, "Controller.CreateVolume: InvalidArgument: ") {
		t.Errorf("got stderr %q, want the method, its code and the message", r.stderr)
	}
	// More capacity than the driver has: every create fails, after a while
	// some may have succeeded (none do here), and the bench stops at once.
	r = csikit(t, "bench", "--capacity", "1125899906842624", "--clients", "2", "--duration", "10s", p.Endpoint).want(t, 1)
	if !strings.Contains(r.stderr, "Controller.CreateVolume: OutOfRange: ") && !strings.Contains(r.stderr, "Controller.CreateVolume: ResourceExhausted: ") {
		t.Errorf("got stderr %q, want the create's OutOfRange or ResourceExhausted", r.stderr)
	}
	noVolumesLeft(t, p.Endpoint)
	// A driver that is not there.
	r = csikit(t, "bench", "--duration", "100ms", t.TempDir()+"/none.sock").want(t, 1)
	if !strings.Contains(r.stderr, "Unavailable") {
		t.Errorf("got stderr %q, want Unavailable", r.stderr)
	}
}

// TestBenchInterrupted: SIGINT in the middle of a run stops the bench;
// every cycle under way ends with its delete, so nothing is left.
func TestBenchInterrupted(t *testing.T) {
	p := hostpath(t)
	cmd := exec.Command(binary(t, "github.com/csikit/csikit/cmd/csikit"), "bench", "--clients", "8", "--duration", "30s", p.Endpoint)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond) // cycles under way
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("got %v, want exit status 1\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the bench did not stop within 20s of SIGINT")
	}
	if !strings.Contains(errb.String(), "interrupted") {
		t.Errorf("got stderr %q, want it to say it was interrupted", errb.String())
	}
	noVolumesLeft(t, p.Endpoint)
}

func TestBenchProbeAndList(t *testing.T) {
	p := hostpath(t)
	r := csikit(t, "bench", "--workload", "probe", "--clients", "2", "--duration", "200ms", "--rounds", "1", p.Endpoint).want(t, 0)
	if !strings.HasPrefix(r.stdout, "probe, 2 clients, 200ms per run, 1 rounds\nround 1  ") {
		t.Errorf("probe: got\n%s", r.stdout)
	}
	// Five volumes in pages of two: every page is listed, the last one's
	// empty token starts over.
	var ids []string
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		v := csikit(t, "call", p.Endpoint, "Controller.CreateVolume", `{"name":"list-`+n+`","volumeCapabilities":[{"mount":{},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}]}`).want(t, 0).object(t)
		ids = append(ids, v["volume"].(map[string]any)["volumeId"].(string))
	}
	r = csikit(t, "bench", "--workload", "list", "--page", "2", "--clients", "1", "--duration", "200ms", "--rounds", "1", p.Endpoint).want(t, 0)
	if !regexp.MustCompile(`(?m)^round 1  \S+ +[1-9]\d*\.\d ops/s`).MatchString(r.stdout) {
		t.Errorf("list: got\n%s", r.stdout)
	}
	for _, id := range ids {
		csikit(t, "call", p.Endpoint, "Controller.DeleteVolume", `{"volumeId":"`+id+`"}`).want(t, 0)
	}
}

// TestBenchCall: any unary method; a driver error quoting the secrets
// (given by file, by --secret and inside --request) is printed with every
// one of them stripped.
func TestBenchCall(t *testing.T) {
	p := hostpath(t)
	r := csikit(t, "bench", "--workload", "call", "--method", "Controller.GetCapacity", "--clients", "2", "--duration", "200ms", "--rounds", "1", "h="+p.Endpoint).want(t, 0)
	if !regexp.MustCompile(`(?m)^round 1  h +[1-9]\d*\.\d ops/s`).MatchString(r.stdout) {
		t.Errorf("call: got\n%s", r.stdout)
	}
	ep := servePlanted(t)
	r = csikit(t, "bench", "--workload", "call", "--method", "nodestagevolume", "--duration", "1s",
		"--request", `{"volumeId":"v1","stagingTargetPath":"/x","volumeCapability":{"mount":{},"accessMode":{"mode":"SINGLE_NODE_WRITER"}},"secrets":{"inline":"inline secret value"}}`,
		"--secrets-file", secretsFile(t), "--secret", "extra="+hostileSecrets["token"], ep).want(t, 1)
	noSecrets(t, r.stdout+r.stderr)
	if strings.Contains(r.stderr, "inline secret value") || !strings.Contains(r.stderr, "Node.NodeStageVolume: PermissionDenied: login refused with") || !strings.Contains(r.stderr, "***stripped***") {
		t.Errorf("got stderr %q, want the method, code and message with the secrets stripped", r.stderr)
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench"},
		{"bench", "--clients", "0", "/x.sock"},
		{"bench", "--workload", "stage", "/x.sock"},
		{"bench", "--duration", "0s", "/x.sock"},
		{"bench", "--rounds", "0", "/x.sock"},
		{"bench", "--page", "0", "/x.sock"},
		{"bench", "--capacity", "-1", "/x.sock"},
		{"bench", "--parameter", "novalue", "/x.sock"},
		{"bench", "--workload", "call", "/x.sock"},
		{"bench", "--workload", "call", "--method", "NoSuchMethod", "/x.sock"},
		{"bench", "--workload", "call", "--method", "GetMetadataAllocated", "/x.sock"},
		{"bench", "--workload", "call", "--method", "Probe", "--request", `{"nope":1}`, "/x.sock"},
		{"bench", "--method", "Probe", "/x.sock"},
	} {
		if r := csikit(t, args...); r.code != 2 || !strings.Contains(r.stderr, "csikit") {
			t.Errorf("csikit %q: got exit status %d and stderr %q, want 2 and a message", args, r.code, r.stderr)
		}
	}
}

//go:build linux

package main_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCSIDriverMatchesHostpath: the object csikit derives over the
// endpoint is byte for byte the one hostpath derives in-process
// (--print-csidriver), with and without attach.
func TestCSIDriverMatchesHostpath(t *testing.T) {
	bin := binary(t, "github.com/csikit/csikit/examples/hostpath")
	for _, flags := range [][]string{nil, {"--enable-attach"}} {
		t.Run(strings.Join(append([]string{"flags"}, flags...), " "), func(t *testing.T) {
			want, err := exec.Command(bin, append([]string{"--print-csidriver", "--state-dir", t.TempDir()}, flags...)...).Output()
			if err != nil {
				t.Fatalf("hostpath --print-csidriver: %v", err)
			}
			p := hostpath(t, flags...)
			got := csikit(t, "csidriver", p.Endpoint, "--lifecycle-modes", "Persistent,Ephemeral").want(t, 0)
			if got.stdout != string(want) {
				t.Errorf("got\n%s\nwant (hostpath --print-csidriver)\n%s", got.stdout, want)
			}
			if attach := strings.Contains(got.stdout, "attachRequired: true"); attach != (flags != nil) {
				t.Errorf("got attachRequired true = %v with flags %q:\n%s", attach, flags, got.stdout)
			}
		})
	}
}

// TestCSIDriverOptions: options the capabilities contradict are refused
// with the reason; the others show in the object.
func TestCSIDriverOptions(t *testing.T) {
	ep := servePlanted(t)
	r := csikit(t, "csidriver", ep, "--storage-capacity=true").want(t, 1)
	if !strings.Contains(r.stderr, "InvalidArgument") || !strings.Contains(r.stderr, "GET_CAPACITY") {
		t.Errorf("got stderr %q, want InvalidArgument naming GET_CAPACITY", r.stderr)
	}
	r = csikit(t, "csidriver", ep, "--pod-info-on-mount", "--token-audience", "https://vault:8200:3600", "--label", "team=storage", "--json").want(t, 0)
	for _, s := range []string{`"name":"planted.csikit.dev"`, `"podInfoOnMount":true`, `"audience":"https://vault:8200"`, `"expirationSeconds":3600`, `"team":"storage"`} {
		if !strings.Contains(strings.ReplaceAll(r.stdout, " ", ""), s) {
			t.Errorf("got no %s in:\n%s", s, r.stdout)
		}
	}
	csikit(t, "csidriver", ep, "--storage-capacity=maybe").want(t, 2)
}

// TestCSIDriverTmpfs: tmpfs has no controller publish and no capacity
// RPC, so neither attach nor storage capacity is asked for.
func TestCSIDriverTmpfs(t *testing.T) {
	r := csikit(t, "csidriver", tmpfs(t).Endpoint).want(t, 0)
	for _, s := range []string{"kind: CSIDriver\n", "  name: tmpfs.csikit.dev\n", "  attachRequired: false\n", "  storageCapacity: false\n", "    - Persistent\n"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("got no %q in:\n%s", s, r.stdout)
		}
	}
}

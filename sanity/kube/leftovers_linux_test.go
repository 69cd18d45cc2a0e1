package kube

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/csikit/csikit/internal/testenv"
)

// leftoverNode returns an Env whose kubelet-mode node holds a host lock
// of its own name and "created" an iptables chain of its own (filter
// table) and the host directory dir: what stopNode removes and Leftovers
// checks, without a kubelet.
func leftoverNode(t *testing.T, dir string) (*Env, iptChain, string) {
	t.Helper()
	testenv.RequireRoot(t, "creates iptables chains")
	testenv.RequireCommand(t, "iptables", "iptables")
	id, err := randomID()
	if err != nil {
		t.Fatal(err)
	}
	lock := fmt.Sprintf("@csikit-sanity-kube-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	base := t.TempDir()
	e := &Env{Dir: filepath.Join(base, "env")}
	n := newNode(KubeletOptions{}, filepath.Join(e.Dir, "node"), "node-1", id)
	e.node = n
	if n.hostLock, err = acquireHostLock(context.Background(), lock, time.Second, t.Logf); err != nil {
		t.Fatal(err)
	}
	c := iptChain{cmd: "iptables", table: "filter", chain: "CSIKIT-LEFT-" + id}
	ipt(t, "-N", c.chain)
	t.Cleanup(func() {
		for _, op := range []string{"-F", "-X"} {
			_ = exec.Command("iptables", "-w", "5", "-t", "filter", op, c.chain).Run()
		}
	})
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.chains, n.createdDirs = []iptChain{c}, []string{dir}
	return e, c, lock
}

func ipt(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("iptables", append([]string{"-w", "5", "-t", "filter"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("iptables %v: %v: %s", args, err, out)
	}
}

// TestLeftoversAfterAnotherEnvironmentStarts: once an environment's
// cleanup releases the host lock, another starts and creates kubelet's
// chains and host directories again, of the same names. The first's
// Leftovers (called after its Cleanup) must not take them for its own.
func TestLeftoversAfterAnotherEnvironmentStarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "containers")
	e, c, lock := leftoverNode(t, dir)
	if left := e.Leftovers(); len(left) != 2 {
		t.Fatalf("before stop: Leftovers %q, want the chain and the directory", left)
	}
	if errs := e.stopNode(); len(errs) > 0 {
		t.Fatalf("stop: %v", errs)
	}
	if left := e.Leftovers(); len(left) > 0 {
		t.Fatalf("after stop: Leftovers %q", left)
	}
	// The next environment: takes the lock, makes the same chain and
	// directory, and a log in it.
	next, err := acquireHostLock(context.Background(), lock, 5*time.Second, t.Logf)
	if err != nil {
		t.Fatalf("host lock not released by stop: %v", err)
	}
	defer next.Close()
	ipt(t, "-N", c.chain)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "other.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if left := e.Leftovers(); len(left) > 0 {
		t.Errorf("another environment's chain and directory reported as this one's leftovers: %q", left)
	}
}

// TestLeftoversReportsARealLeak: what stop could not remove while it held
// the host lock (a chain still referenced, a created directory holding a
// file) stays reported after the lock is released and the host changes.
func TestLeftoversReportsARealLeak(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "containers")
	e, c, _ := leftoverNode(t, dir)
	// A reference stop does not know about: -X fails.
	ref := c.chain + "-R"
	ipt(t, "-N", ref)
	ipt(t, "-A", ref, "-j", c.chain)
	t.Cleanup(func() {
		for _, op := range []string{"-F", "-X"} {
			_ = exec.Command("iptables", "-w", "5", "-t", "filter", op, ref).Run()
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "0.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if errs := e.stopNode(); len(errs) != 2 {
		t.Errorf("stop: %v, want the chain's -X and the directory's file reported", errs)
	}
	// After the release: the leak is removed by someone else.
	ipt(t, "-F", ref)
	ipt(t, "-F", c.chain)
	ipt(t, "-X", c.chain)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	left := e.Leftovers()
	for _, want := range []string{"iptables chain filter/" + c.chain, "directory " + dir} {
		if !slices.Contains(left, want) {
			t.Errorf("Leftovers %q lacks %q", left, want)
		}
	}
}

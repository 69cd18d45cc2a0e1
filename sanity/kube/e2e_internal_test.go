package kube

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseE2EJUnit: the counts of a ginkgo JUnit report of e2e.test,
// where specs the focus left out are not counted and a skip keeps the
// suite's reason.
func TestParseE2EJUnit(t *testing.T) {
	f := filepath.Join(t.TempDir(), "junit.xml")
	report := `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="6" disabled="2" errors="0" failures="1" time="10">
  <testsuite name="Kubernetes e2e suite" package="/" tests="6" disabled="2" skipped="3" errors="0" failures="1" time="10">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1"></testcase>
    <testcase name="[sig-storage] CSI Volumes [Driver: x] [Testpattern: Dynamic PV (default fs)] provisioning should provision storage" classname="Kubernetes e2e suite" status="passed" time="3"></testcase>
    <testcase name="[sig-storage] CSI Volumes [Driver: x] [Testpattern: Dynamic PV (default fs)] volumes should store data" classname="Kubernetes e2e suite" status="failed" time="3"><failure message="timed out" type="failed">boom</failure></testcase>
    <testcase name="[sig-storage] CSI Volumes [Driver: x] [Testpattern: Dynamic PV (ntfs)] volumes should store data" classname="Kubernetes e2e suite" status="skipped" time="0"><skipped message="skipped - Driver x doesn&#39;t support ntfs -- skipping"></skipped></testcase>
    <testcase name="[sig-apps] Deployment should run" classname="Kubernetes e2e suite" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
    <testcase name="[sig-storage] pending" classname="Kubernetes e2e suite" status="pending" time="0"><skipped message="pending"></skipped></testcase>
  </testsuite>
</testsuites>`
	if err := os.WriteFile(f, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := ParseE2EJUnit(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.Summary() != "1 passed, 1 failed, 1 skipped" {
		t.Errorf("got %q, want 1 passed, 1 failed, 1 skipped", r.Summary())
	}
	if len(r.Failures) != 1 || !slices.Contains(r.Failures, "[sig-storage] CSI Volumes [Driver: x] [Testpattern: Dynamic PV (default fs)] volumes should store data") {
		t.Errorf("failures %q", r.Failures)
	}
	if len(r.Skips) != 1 || r.Skips[0].Reason != "Driver x doesn't support ntfs -- skipping" {
		t.Errorf("skips %+v", r.Skips)
	}
	if _, err := ParseE2EJUnit(filepath.Join(t.TempDir(), "none.xml")); err == nil {
		t.Error("a missing report: got no error")
	}
}

// TestEnsureE2EBinariesRebuildsChangedSuite: a complete directory whose
// e2e.test was built from the current internal/e2estorage is used as it
// is, and one whose suite source changed since (or that has no stamp, as
// a full e2e.test of an earlier release of this package) is rebuilt. The
// go command is out of PATH, so a build shows as its error.
func TestEnsureE2EBinariesRebuildsChangedSuite(t *testing.T) {
	mod := t.TempDir()
	for f, body := range map[string]string{
		"go.mod":                        "module example.com/m\n",
		"go.sum":                        "",
		"internal/e2estorage/doc.go":    "package e2estorage\n",
		"internal/e2estorage/x_test.go": "package e2estorage\n",
	} {
		p := filepath.Join(mod, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := BuildOptions{ModuleDir: mod, CacheDir: t.TempDir()}
	dir, err := toolsDir(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{BinE2ETest, BinAgnhost, BinKubectl, BinGinkgo} {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", t.TempDir())

	if _, err := EnsureE2EBinaries(t.Context(), o); err == nil || !strings.Contains(err.Error(), "go test -c") {
		t.Fatalf("no stamp (an e2e.test of before): got %v, want a rebuild (go test -c)", err)
	}
	h, err := e2eSuiteHash(mod)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, BinE2ETest+".src"), []byte(h), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := EnsureE2EBinaries(t.Context(), o); err != nil || got != dir {
		t.Fatalf("stamped and complete: got %q, %v; want %q and no build", got, err, dir)
	}
	if err := os.WriteFile(filepath.Join(mod, "internal/e2estorage/x_test.go"), []byte("package e2estorage // changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureE2EBinaries(t.Context(), o); err == nil || !strings.Contains(err.Error(), "go test -c") {
		t.Fatalf("suite source changed: got %v, want a rebuild (go test -c)", err)
	}
}

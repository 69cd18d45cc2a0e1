package kube

import (
	"os"
	"path/filepath"
	"slices"
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

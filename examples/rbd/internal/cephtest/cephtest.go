// Package cephtest gives the rbd example's tests the throwaway Ceph
// cluster that test/cluster.sh starts, and the strict-skip rule of
// csikit's internal/testenv (which this module cannot import): a test that
// lacks a prerequisite skips, but under CSIKIT_STRICT_TESTS=1 (CI) the skip
// fails the test instead, so CI cannot pass by testing nothing.
package cephtest

import (
	"os"
	"strings"
	"testing"
)

// StrictEnv is the variable that turns prerequisite skips into failures.
const StrictEnv = "CSIKIT_STRICT_TESTS"

// Skipf skips t for a missing prerequisite, or fails it when
// CSIKIT_STRICT_TESTS=1.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(StrictEnv) == "1" {
		t.Fatalf("missing prerequisite (%s=1 forbids skipping): "+format, append([]any{StrictEnv}, args...)...)
	}
	t.Skipf(format, args...)
}

// RequireRoot skips (or fails under strict mode) when not root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		Skipf(t, "needs root")
	}
}

// Cluster is a running cluster's connection settings, read from the
// environment that `. $(test/cluster.sh env DIR)` sets.
type Cluster struct {
	// Conf is a ceph.conf naming the monitor (for CLI tools).
	Conf string
	// Monitors is the monitor address list.
	Monitors string
	// AdminKeyring is client.admin's keyring file.
	AdminKeyring string
	// Pool is an rbd-initialized pool.
	Pool string
	// User and Key are the restricted user the driver is given in CSI
	// secrets.
	User, Key string
}

// Secrets are the CSI secrets that carry c's user.
func (c Cluster) Secrets() map[string]string {
	return map[string]string{"userID": c.User, "userKey": c.Key}
}

// Require returns the cluster, or skips t (fails under strict mode) when
// none is configured.
func Require(t testing.TB) Cluster {
	t.Helper()
	c := Cluster{
		Conf: os.Getenv("CSIKIT_CEPH_CONF"), Monitors: os.Getenv("CSIKIT_CEPH_MON"),
		AdminKeyring: os.Getenv("CSIKIT_CEPH_KEYRING"), Pool: os.Getenv("CSIKIT_CEPH_POOL"),
		User: os.Getenv("CSIKIT_CEPH_USER"),
	}
	if c.Monitors == "" || c.Pool == "" || c.User == "" || os.Getenv("CSIKIT_CEPH_KEY_FILE") == "" {
		Skipf(t, "no Ceph cluster configured: start one with examples/rbd/test/cluster.sh start DIR, then set -a; . DIR/env; set +a")
	}
	key, err := os.ReadFile(os.Getenv("CSIKIT_CEPH_KEY_FILE"))
	if err != nil {
		t.Fatalf("reading CSIKIT_CEPH_KEY_FILE: %v", err)
	}
	c.Key = strings.TrimSpace(string(key))
	return c
}

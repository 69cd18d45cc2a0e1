// Package testenv decides what a test does when the machine lacks something
// it needs: root, a command, a device, a kernel feature.
//
// Outside CI such a test skips and says why. Under CSIKIT_STRICT_TESTS=1 —
// which .ci/run sets, because CI runs as root with every tool installed — the
// same test fails instead, so a real test can never go green by skipping.
// The one exception is SkipWithoutCapability: a capability this process
// provably lacks (caps.Has says so) is not
// something CI can install, so that skip stays a skip.
package testenv

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/csikit/csikit/caps"
)

// StrictEnv is the environment variable that turns skips into failures.
const StrictEnv = "CSIKIT_STRICT_TESTS"

// Strict reports whether skips for a missing prerequisite must fail.
func Strict() bool {
	v := os.Getenv(StrictEnv)
	return v != "" && v != "0" && v != "false"
}

// Skip skips the test with the reason, or fails it under Strict.
func Skip(tb testing.TB, reason string) {
	tb.Helper()
	if Strict() {
		tb.Fatalf("%s=1 forbids this skip: %s", StrictEnv, reason)
	}
	tb.Skip(reason)
}

// Skipf is Skip with a format.
func Skipf(tb testing.TB, format string, args ...any) {
	tb.Helper()
	Skip(tb, fmt.Sprintf(format, args...))
}

// RequireRoot skips (or fails under Strict) unless the process runs as root.
// why says what the test does that needs root.
func RequireRoot(tb testing.TB, why string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		Skipf(tb, "needs root: %s", why)
	}
}

// RequireCommand skips (or fails under Strict) unless name is on PATH.
// pkg is the Debian package that provides it.
func RequireCommand(tb testing.TB, name, pkg string) {
	tb.Helper()
	if _, err := exec.LookPath(name); err != nil {
		Skipf(tb, "needs %s (Debian package %s): %v", name, pkg, err)
	}
}

// SkipWithoutCapability skips when the process provably lacks the capability
// (even under Strict: CI cannot grant it), with reason in the message.
// When the capability is held, or cannot be read, it returns and the test
// goes on; a test that then meets the kernel's refusal anyway must call
// Skip, which fails under Strict.
func SkipWithoutCapability(tb testing.TB, c caps.Cap, reason string) {
	tb.Helper()
	if has, err := caps.Has(c); err == nil && !has {
		tb.Skipf("needs %s, which this process lacks: %s", c, reason)
	}
}

// KernelOption reports how the running kernel was built with a config
// option ("CONFIG_XFS_QUOTA"): "y", "m", a value, or "" when it is not
// set. ok is false when the build config cannot be read (no
// /proc/config.gz).
func KernelOption(name string) (value string, ok bool) {
	f, err := os.Open("/proc/config.gz")
	if err != nil {
		return "", false
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return "", false
	}
	s := bufio.NewScanner(zr)
	for s.Scan() {
		if v, found := strings.CutPrefix(s.Text(), name+"="); found {
			return v, true
		}
	}
	if s.Err() != nil {
		return "", false
	}
	return "", true
}

// SkipWithoutKernelOption skips when the running kernel was provably built
// without a config option (even under Strict: CI cannot rebuild the
// kernel), with reason in the message. When the option is set, or the
// build config cannot be read, it returns and the test goes on; a test
// that then meets the kernel's refusal anyway must call Skip, which fails
// under Strict.
func SkipWithoutKernelOption(tb testing.TB, name, reason string) {
	tb.Helper()
	if v, ok := KernelOption(name); ok && v == "" {
		tb.Skipf("the kernel was built without %s (/proc/config.gz): %s", name, reason)
	}
}

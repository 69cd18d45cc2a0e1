package kube_test

import (
	"fmt"
	"os"
	"testing"
)

// strictEnv is the variable .ci/run sets: a test that would skip for a
// missing prerequisite (a tool, a server) fails instead. The main module's
// internal/testenv reads the same variable; this module cannot import it.
const strictEnv = "CSIKIT_STRICT_TESTS"

// skipPrereq skips t for a missing prerequisite, or fails it when
// CSIKIT_STRICT_TESTS is set (CI has every prerequisite installed).
// Skips for what does not apply here (another OS) use t.Skip.
func skipPrereq(t *testing.T, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if v := os.Getenv(strictEnv); v != "" && v != "0" && v != "false" {
		t.Fatalf("%s=1 forbids this skip: %s", strictEnv, reason)
	}
	t.Skip(reason)
}

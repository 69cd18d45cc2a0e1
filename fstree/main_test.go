//go:build linux

package fstree_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if copyChild() || deepChild() { // child processes of TestCopyKilledMidway and TestWalksDeeperThanDescriptorLimit
		return
	}
	goleak.VerifyTestMain(m)
}

// childEnv names src and dst for a child process that copies and exits.
const childEnv = "FSTREE_TEST_COPY_CHILD"

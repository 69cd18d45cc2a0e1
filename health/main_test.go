package health_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must leave no goroutine behind: bounded syscalls finished.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

package driver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/csikit/csikit/command"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
)

// TestRealRbdFailureNamesCause runs the real rbd CLI against the test
// cluster on an image that does not exist: its failure, through
// package command as the mappers run it, names rbd's own reason from
// stderr (issue 24: each tool the SDK runs, with its real failing
// output; mount's summary tests quote this one).
func TestRealRbdFailureNamesCause(t *testing.T) {
	c := cephtest.Require(t)
	missing := "csikit-no-such-image-" + strings.Repeat("x", 8)
	_, err := command.Run(context.Background(), "rbd",
		[]string{"-c", c.Conf, "--keyring", c.AdminKeyring, "info", c.Pool + "/" + missing},
		command.Options{})
	if err == nil {
		t.Fatalf("rbd info of a missing image succeeded")
	}
	want := "error opening image " + missing + ": (2) No such file or directory"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not carry rbd's reason %q", err, want)
	}
}

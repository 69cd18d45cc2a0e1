package driver

import (
	"strings"
	"testing"

	"github.com/csikit/csikit/mount"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestRunErrNamesCause checks a failed rbd run reports the reason rbd gave
// on stderr. The output is rbd device map's on a kernel lacking the
// image's features, as quoted in github.com/ceph/ceph-csi/issues/2397,
// with a stdout line of progress added to show stderr wins.
func TestRunErrNamesCause(t *testing.T) {
	stdout := []byte("mapping image\n")
	stderr := []byte("rbd: sysfs write failed\nrbd: map failed: (5) Input/output error\n")
	out := append(append([]byte{}, stderr...), stdout...)
	err := runErr(&mount.ExitError{Command: "rbd", Code: 5, Output: out, Stdout: stdout, Stderr: stderr}, out, "rbd device map")
	if status.Code(err) != codes.Internal {
		t.Fatalf("code %v, want Internal", status.Code(err))
	}
	want := "rbd device map: rbd exited with status 5: rbd: sysfs write failed; rbd: map failed: (5) Input/output error"
	if msg := status.Convert(err).Message(); msg != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
	if strings.Contains(err.Error(), "mapping image") {
		t.Fatalf("message %q holds stdout's progress", err)
	}
}

package driver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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

// TestToolsKeepStdoutClean runs a real program through the mappers' tool
// runner: JSON on stdout stays parseable beside a warning on stderr, and
// a failure names the cause from stderr.
func TestToolsKeepStdoutClean(t *testing.T) {
	run := execTools(time.Minute)
	out, err := run(context.Background(), "sh", "-c", `echo 'rbd-nbd: warning: old kernel' >&2; echo '[{"pool":"p","image":"i","device":"/dev/nbd0"}]'`)
	if err != nil {
		t.Fatal(err)
	}
	var list []struct{ Pool, Image, Device string }
	if err := json.Unmarshal(out, &list); err != nil || len(list) != 1 || list[0].Device != "/dev/nbd0" {
		t.Fatalf("got %q (%v), want one mapping on /dev/nbd0", out, err)
	}
	out, err = run(context.Background(), "sh", "-c", `echo mapping image; echo 'rbd: map failed: (5) Input/output error' >&2; exit 5`)
	err = runErr(err, out, "rbd device map")
	want := "rbd device map: sh exited with status 5: rbd: map failed: (5) Input/output error"
	if msg := status.Convert(err).Message(); status.Code(err) != codes.Internal || msg != want {
		t.Fatalf("got %v %q, want Internal %q", status.Code(err), msg, want)
	}
}

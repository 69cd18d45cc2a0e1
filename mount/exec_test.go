//go:build linux

package mount_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/command"
	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/mount"
	"google.golang.org/grpc/codes"
)

func blkid(out string, code int) func([]string) ([]byte, error) {
	return func([]string) ([]byte, error) {
		if code != 0 {
			return []byte(out), &mount.ExitError{Command: "blkid", Code: code, Output: []byte(out)}
		}
		return []byte(out), nil
	}
}

func TestDiskFormatScripted(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		reply   func([]string) ([]byte, error)
		want    string
		wantErr bool
	}{
		{"blank", blkid("", 2), "", false},
		{"ext4", blkid("DEVNAME=/dev/x\nTYPE=ext4\n", 0), "ext4", false},
		{"partitions", blkid("PTTYPE=gpt\n", 0), "unknown data, probably partitions", false},
		{"blkid fails", blkid("boom", 4), "", true},
		{"garbage", blkid("no equals sign\n", 0), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{reply: map[string]func([]string) ([]byte, error){"blkid": tc.reply}}
			got, err := newMounter(s).DiskFormat(ctx, "/dev/x")
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("got %q, %v, want %q (error %t)", got, err, tc.want, tc.wantErr)
			}
			if !s.called("blkid -p -s TYPE -s PTTYPE -o export /dev/x") {
				t.Fatalf("calls %q: want blkid probing /dev/x", s.calls)
			}
		})
	}
}

// TestStageScripted drives the format decision with a scripted blkid/mkfs
// against a real (blank) loop device, so the decision, not the tools, is
// under test.
func TestStageScripted(t *testing.T) {
	dev, _ := loopDevice(t, 16<<20)
	ctx := context.Background()
	mkfsFails := func([]string) ([]byte, error) {
		return []byte("mkfs: no"), &mount.ExitError{Command: "mkfs.ext4", Code: 1}
	}
	t.Run("refuses other type", func(t *testing.T) {
		s := &script{reply: map[string]func([]string) ([]byte, error){"blkid": blkid("TYPE=xfs\n", 0), "mkfs.ext4": mkfsFails}}
		wantCode(t, newMounter(s).Stage(ctx, mount.StageOptions{Device: dev, Target: t.TempDir()}), codes.FailedPrecondition)
		if s.called("mkfs") {
			t.Fatalf("calls %q: want no mkfs", s.calls)
		}
	})
	t.Run("refuses partitioned", func(t *testing.T) {
		s := &script{reply: map[string]func([]string) ([]byte, error){"blkid": blkid("PTTYPE=dos\n", 0)}}
		wantCode(t, newMounter(s).Stage(ctx, mount.StageOptions{Device: dev, Target: t.TempDir()}), codes.FailedPrecondition)
	})
	t.Run("fsck of an existing ext4", func(t *testing.T) {
		for _, tc := range []struct {
			code int
			want codes.Code
		}{
			{1, codes.Internal}, // corrected: goes on to mount, which fails on the blank device
			{4, codes.FailedPrecondition},
			{8, codes.Internal}, // fsck could not run: logged, mount attempted
		} {
			s := &script{reply: map[string]func([]string) ([]byte, error){
				"blkid": blkid("TYPE=ext4\n", 0),
				"fsck": func([]string) ([]byte, error) {
					return []byte("fsck output"), &mount.ExitError{Command: "fsck", Code: tc.code}
				},
			}}
			wantCode(t, newMounter(s).Stage(ctx, mount.StageOptions{Device: dev, Target: t.TempDir()}), tc.want)
			if !s.called("fsck -a " + dev) {
				t.Fatalf("calls %q: want fsck -a %s", s.calls, dev)
			}
			// Read-only stages are not checked.
			s.calls = nil
			_ = newMounter(s).Stage(ctx, mount.StageOptions{Device: dev, Target: t.TempDir(), ReadOnly: true})
			if s.called("fsck") {
				t.Fatalf("calls %q: want no fsck for a read-only stage", s.calls)
			}
		}
	})
	t.Run("mkfs arguments and failure", func(t *testing.T) {
		s := &script{reply: map[string]func([]string) ([]byte, error){"blkid": blkid("", 2), "mkfs.ext4": mkfsFails}}
		err := newMounter(s).Stage(ctx, mount.StageOptions{Device: dev, Target: t.TempDir(), FormatOptions: []string{"-E", "nodiscard"}})
		wantCode(t, err, codes.Internal)
		if want := "mkfs.ext4 -F -m0 -E nodiscard " + dev; !s.called(want) {
			t.Fatalf("calls %q: want %q", s.calls, want)
		}
		var ee *mount.ExitError
		if !errors.As(err, &ee) || ee.Code != 1 {
			t.Fatalf("error %v: want it to unwrap to the mkfs *ExitError", err)
		}
	})
	t.Run("mkfs fails silently: no empty fragment", func(t *testing.T) {
		// A missing mkfs.xfs prints nothing; the message must still read
		// "format <dev> as xfs: <cause>", not "…as xfs: : <cause>".
		s := &script{reply: map[string]func([]string) ([]byte, error){"blkid": blkid("", 2)}}
		err := newMounter(s).Stage(ctx, mount.StageOptions{Device: dev, Target: t.TempDir(), FSType: "xfs"})
		wantCode(t, err, codes.Internal)
		want := "format " + dev + " as xfs: script: unexpected command mkfs.xfs"
		if err == nil || err.Error() != want {
			t.Fatalf("error %q, want %q", err, want)
		}
	})
	t.Run("deadline reaches the command", func(t *testing.T) {
		var deadline time.Time
		s := &script{reply: map[string]func([]string) ([]byte, error){"blkid": blkid("", 2)}}
		r := mount.RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
			if name == "mkfs.ext4" {
				deadline, _ = ctx.Deadline()
				return nil, ctx.Err()
			}
			return s.Run(ctx, name, args...)
		})
		want := time.Now().Add(time.Hour)
		dctx, cancel := context.WithDeadline(ctx, want)
		defer cancel()
		_ = newMounter(r).Stage(dctx, mount.StageOptions{Device: dev, Target: t.TempDir()})
		if !deadline.Equal(want) {
			t.Fatalf("mkfs saw deadline %v, want %v", deadline, want)
		}
	})
}

func TestStageHelperScripted(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	var args []string
	s := &script{reply: map[string]func([]string) ([]byte, error){"mount": func(a []string) ([]byte, error) {
		args = a
		return []byte("mount.nfs: access denied for password=hunter2"), &mount.ExitError{Command: "mount", Code: 32}
	}}}
	m := mount.New(mount.Options{Runner: s, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	target := filepath.Join(t.TempDir(), "staging")
	err := m.Stage(ctx, mount.StageOptions{
		Device: "server:/export", Target: target, FSType: "nfs",
		MountFlags: []string{"vers=4.1"}, SensitiveMountFlags: []string{"password=hunter2"}, ReadOnly: true,
	})
	wantCode(t, err, codes.Internal)
	want := []string{"-t", "nfs", "-o", "vers=4.1,password=hunter2,ro", "server:/export", target}
	if strings.Join(args, " ") != strings.Join(want, " ") {
		t.Fatalf("mount args: got %q, want %q", args, want)
	}
	if strings.Contains(err.Error(), "hunter2") || strings.Contains(logs.String(), "hunter2") {
		t.Fatalf("secret leaked: error %q, logs %q", err, logs.String())
	}
}

func TestExecRunner(t *testing.T) {
	ctx := context.Background()
	r := mount.ExecRunner()
	out, err := r.Run(ctx, "sh", "-c", "echo out; echo err >&2; exit 3")
	var ee *mount.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("got %v, want *ExitError with code 3", err)
	}
	if string(out) != "out\nerr\n" {
		t.Fatalf("combined output: got %q, want %q", out, "out\nerr\n")
	}
	if string(ee.Stdout) != "out\n" || string(ee.Stderr) != "err\n" {
		t.Fatalf("streams: got stdout %q, stderr %q, want them apart", ee.Stdout, ee.Stderr)
	}
	var ce *command.Error
	if !errors.As(err, &ce) || ce.ExitCode != 3 || ce.Command != "sh" {
		t.Fatalf("got %v, want it to unwrap to the *command.Error", err)
	}
	out, _ = r.Run(ctx, "sh", "-c", "echo err >&2; sleep 0.05; echo out; exit 3")
	if string(out) != "out\nerr\n" {
		t.Fatalf("output: got %q, want stdout then stderr", out)
	}
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = r.Run(dctx, "sleep", "10")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want an error wrapping context.DeadlineExceeded", err)
	}
	testenv.WantCode(t, err, codes.DeadlineExceeded)
	if out, err := r.Run(ctx, "sh", "-c", "echo $LC_ALL"); err != nil || string(out) != "C\n" {
		t.Fatalf("LC_ALL: got %q, %v, want C", out, err)
	}
}

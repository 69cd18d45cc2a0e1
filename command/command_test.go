//go:build linux

package command_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/command"
	"github.com/csikit/csikit/internal/testenv"
)

func sh(script string) (string, []string) { return "sh", []string{"-c", script} }

// TestStreamsApartJSON runs programs that report JSON on stdout and warn on
// stderr, interleaved, and parses stdout as is.
func TestStreamsApartJSON(t *testing.T) {
	ctx := context.Background()
	t.Run("interleaved", func(t *testing.T) {
		// 2,000 alternating writes: merged output would break the document.
		name, args := sh(`echo '{"lvs":['; i=0; while [ $i -lt 2000 ]; do
			echo "  WARNING: lvmetad is not active $i" >&2
			[ $i -gt 0 ] && printf ','
			echo "{\"lv\":\"lv$i\"}"
			i=$((i+1)); done; echo ']}'`)
		res, err := command.Run(ctx, name, args, command.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ LVs []struct{ LV string } }
		if err := json.Unmarshal(res.Stdout, &doc); err != nil {
			t.Fatalf("stdout is not clean JSON: %v", err)
		}
		if len(doc.LVs) != 2000 || doc.LVs[1999].LV != "lv1999" {
			t.Fatalf("got %d LVs, want 2000", len(doc.LVs))
		}
		if n := bytes.Count(res.Stderr, []byte("WARNING")); n != 2000 {
			t.Fatalf("stderr: got %d warnings, want 2000", n)
		}
	})
	t.Run("lsblk", func(t *testing.T) {
		// A real tool: lsblk reports the loop device as JSON and warns
		// about /dev/null on stderr, exiting 64 (some devices not found).
		testenv.RequireCommand(t, "lsblk", "util-linux")
		dev := testenv.LoopDevice(t, 1<<20)
		_, err := command.Run(ctx, "lsblk", []string{"--json", "-o", "NAME,SIZE", dev, "/dev/null"}, command.Options{})
		var e *command.Error
		if !errors.As(err, &e) || e.ExitCode == 0 {
			t.Fatalf("got %v, want an *Error with a non-zero status", err)
		}
		var doc struct{ Blockdevices []struct{ Name string } }
		if err := json.Unmarshal(e.Stdout, &doc); err != nil {
			t.Fatalf("stdout %q is not clean JSON: %v", e.Stdout, err)
		}
		if len(doc.Blockdevices) != 1 || doc.Blockdevices[0].Name != filepath.Base(dev) {
			t.Fatalf("got %+v, want %s", doc, filepath.Base(dev))
		}
		if got := e.Summary(); !strings.Contains(got, "/dev/null: not a block device") {
			t.Fatalf("summary %q: want lsblk's warning", got)
		}
		if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), "lsblk exited with status") {
			t.Fatalf("status %v: want Internal naming lsblk and its status", st)
		}
	})
}

func TestExitStatusSignalAndStart(t *testing.T) {
	ctx := context.Background()
	name, args := sh(`echo progress; echo 'mkfs.xfs version 6.1.0' >&2; echo 'Filesystem must be larger than 300MB.' >&2; exit 1`)
	_, err := command.Run(ctx, name, args, command.Options{})
	var e *command.Error
	if !errors.As(err, &e) || e.ExitCode != 1 || e.Signal != 0 || e.Command != "sh" {
		t.Fatalf("got %#v, want exit status 1 of sh", err)
	}
	if got, want := err.Error(), "sh exited with status 1: Filesystem must be larger than 300MB."; got != want {
		t.Fatalf("message: got %q, want %q", got, want)
	}

	name, args = sh(`kill -KILL $$`)
	_, err = command.Run(ctx, name, args, command.Options{})
	if !errors.As(err, &e) || e.Signal != syscall.SIGKILL || e.ExitCode != -1 {
		t.Fatalf("got %v, want killed by SIGKILL", err)
	}
	testenv.WantCode(t, err, codes.Internal)

	_, err = command.Run(ctx, "csikit-no-such-tool", nil, command.Options{})
	if !errors.As(err, &e) || !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("got %v, want an *Error wrapping exec.ErrNotFound", err)
	}
}

// alive reports whether pid is a process that has not exited (a zombie
// waiting for its reaper counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !alive(pid) {
			return
		}
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("process %d is still running after the call returned", pid)
}

// stubborn is a program whose child ignores SIGTERM and holds stdout and
// stderr open, writing its PID to pidfile first.
func stubborn(pidfile string) (string, []string) {
	return sh(`sh -c 'trap "" TERM; echo $$ > ` + pidfile + `; exec sleep 60' & sleep 60`)
}

func readPID(t *testing.T, pidfile string) int {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(pidfile)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
			return pid
		}
	}
	t.Fatalf("no PID in %s", pidfile)
	return 0
}

// TestTimeoutKillsTheGroup: a grandchild that ignores SIGTERM and holds the
// pipes neither keeps Run waiting nor outlives it. On a loaded machine the
// limit can end the call before the grandchild has started (nothing then
// survives to check): the attempt is repeated with a longer limit.
func TestTimeoutKillsTheGroup(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func(d time.Duration) (context.Context, context.CancelFunc)
		opts func(d time.Duration) command.Options
		want codes.Code
		msg  func(d time.Duration) string
	}{
		{"timeout", func(time.Duration) (context.Context, context.CancelFunc) {
			return context.WithCancel(context.Background())
		},
			func(d time.Duration) command.Options {
				return command.Options{Timeout: d, Grace: 200 * time.Millisecond}
			},
			codes.DeadlineExceeded, func(d time.Duration) string { return fmt.Sprintf("timed out after %s", d) }},
		{"deadline", func(d time.Duration) (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), d)
		}, func(time.Duration) command.Options { return command.Options{Grace: 200 * time.Millisecond} },
			codes.DeadlineExceeded, func(time.Duration) string { return "deadline" }},
		{"cancel", func(d time.Duration) (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(d, cancel)
			return ctx, cancel
		}, func(time.Duration) command.Options { return command.Options{Grace: 200 * time.Millisecond} },
			codes.Canceled, func(time.Duration) string { return "cancelled" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for d := 300 * time.Millisecond; ; d *= 3 {
				if d > 10*time.Second {
					t.Fatal("the grandchild never started before the limit, even with 8.1s")
				}
				pidfile := filepath.Join(t.TempDir(), "pid")
				ctx, cancel := tc.ctx(d)
				name, args := stubborn(pidfile)
				done := make(chan error, 1)
				go func() { _, err := command.Run(ctx, name, args, tc.opts(d)); done <- err }()
				pid, err := pidOrDone(t, pidfile, done)
				if pid == 0 {
					cancel()
					testenv.WantCode(t, err, tc.want)
					t.Logf("the call ended (%v) before the grandchild started; again with a limit of %s", err, 3*d)
					continue
				}
				if err == nil {
					select {
					case err = <-done:
					case <-time.After(30 * time.Second):
						_ = syscall.Kill(pid, syscall.SIGKILL)
						t.Fatal("Run did not return 30s after its timeout")
					}
				}
				cancel()
				testenv.WantCode(t, err, tc.want)
				if !strings.Contains(err.Error(), tc.msg(d)) {
					t.Fatalf("message %q: want %q", err, tc.msg(d))
				}
				waitGone(t, pid)
				return
			}
		})
	}
}

// pidOrDone waits for the PID stubborn writes to pidfile, or for the call
// to end: it returns the PID (0 when none was written) and the call's
// error when the call ended.
func pidOrDone(t *testing.T, pidfile string, done <-chan error) (int, error) {
	t.Helper()
	read := func() int {
		b, _ := os.ReadFile(pidfile)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			return 0
		}
		return pid
	}
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		select {
		case err := <-done:
			// The grandchild may have written its PID just before the
			// call ended: then it is checked like any other.
			return read(), err
		case <-time.After(10 * time.Millisecond):
		}
		if pid := read(); pid > 0 {
			return pid, nil
		}
	}
	t.Fatalf("no PID in %s and the call still runs after 30s", pidfile)
	return 0, nil
}

// TestHelperHoldingPipesAfterExit: the program exits but leaves a child
// that holds its output; Run returns after the grace and kills it.
func TestHelperHoldingPipesAfterExit(t *testing.T) {
	pidfile := filepath.Join(t.TempDir(), "pid")
	name, args := sh(`sh -c 'trap "" TERM; echo $$ > ` + pidfile + `; exec sleep 60' & echo started`)
	res, err := command.Run(context.Background(), name, args, command.Options{Grace: 200 * time.Millisecond})
	if !errors.Is(err, exec.ErrWaitDelay) || !strings.Contains(err.Error(), "held its output open") {
		t.Fatalf("got %v, want exec.ErrWaitDelay saying a helper held the output", err)
	}
	if string(res.Stdout) != "started\n" {
		t.Fatalf("stdout %q, want started", res.Stdout)
	}
	waitGone(t, readPID(t, pidfile))

	// The same after a failure: the status is kept, the helper killed.
	pidfile = filepath.Join(t.TempDir(), "pid")
	name, args = sh(`sh -c 'trap "" TERM; echo $$ > ` + pidfile + `; exec sleep 60' & echo 'no such volume group' >&2; exit 5`)
	_, err = command.Run(context.Background(), name, args, command.Options{Grace: 200 * time.Millisecond})
	var e *command.Error
	if !errors.As(err, &e) || e.ExitCode != 5 || e.Summary() != "no such volume group" {
		t.Fatalf("got %v, want exit status 5 naming the cause", err)
	}
	waitGone(t, readPID(t, pidfile))
}

func TestOutputLimit(t *testing.T) {
	// 8 MiB to stdout, then a line to stderr: the writer is drained, not
	// blocked, and what is kept is said to be cut.
	name, args := sh(`head -c 8388608 /dev/zero; echo done >&2`)
	res, err := command.Run(context.Background(), name, args, command.Options{MaxOutput: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 1<<20 || !res.StdoutTruncated || res.StderrTruncated || string(res.Stderr) != "done\n" {
		t.Fatalf("got %d bytes (truncated %t), stderr %q (truncated %t); want 1 MiB cut, stderr whole",
			len(res.Stdout), res.StdoutTruncated, res.Stderr, res.StderrTruncated)
	}
	name, args = sh(`head -c 100000 /dev/zero >&2; exit 3`)
	_, err = command.Run(context.Background(), name, args, command.Options{MaxOutput: 10})
	var e *command.Error
	if !errors.As(err, &e) || !e.Truncated || len(e.Stderr) != 10 {
		t.Fatalf("got %#v, want a truncated *Error with 10 bytes of stderr", err)
	}
}

// TestSecretOnStdinOnly reads the running child's argv and environment
// from /proc and finds no secret, and the secret arrives whole on stdin.
func TestSecretOnStdinOnly(t *testing.T) {
	secret := []byte("pa'ss\"wo\nrd $(x) `y`\\\n\x00tail")
	dir := t.TempDir()
	pidfile, gofile := filepath.Join(dir, "pid"), filepath.Join(dir, "go")
	name, args := sh(`echo $$ > ` + pidfile + `; while [ ! -e ` + gofile + ` ]; do sleep 0.02; done; cat`)
	type result struct {
		res command.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := command.Run(context.Background(), name, args, command.Options{Secret: secret, Timeout: time.Minute})
		done <- result{res, err}
	}()
	pid := readPID(t, pidfile)
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, part := range bytes.Split(secret, []byte("\n")) {
			if len(part) >= 4 && bytes.Contains(b, part) {
				t.Fatalf("/proc/%d/%s holds the secret: %q", pid, f, b)
			}
		}
	}
	if err := os.WriteFile(gofile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !bytes.Equal(r.res.Stdout, secret) {
		t.Fatalf("got %q, %v; want the secret back from stdin", r.res.Stdout, r.err)
	}

	// A tool that echoes its input in a failure message: the error does
	// not carry the secret.
	name, args = sh(`cat >&2; exit 2`)
	_, err := command.Run(context.Background(), name, args, command.Options{Secret: secret})
	var e *command.Error
	if !errors.As(err, &e) || bytes.Contains(e.Stderr, secret) || strings.Contains(err.Error(), "pa'ss") {
		t.Fatalf("error %q (stderr %q) holds the secret", err, e.Stderr)
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := command.Run(ctx, "true", nil, command.Options{})
	testenv.WantCode(t, err, codes.Canceled)
}

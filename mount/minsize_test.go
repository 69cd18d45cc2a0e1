//go:build linux

package mount_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/csikit/csikit/mount"
	"google.golang.org/grpc/codes"
)

const mib = 1 << 20

// mkfsFile formats a sparse file of size bytes with mkfs.<fsType> and
// returns mkfs's error and output.
func mkfsFile(t *testing.T, fsType string, size int64) ([]byte, error) {
	t.Helper()
	img := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	force := "-F"
	if fsType == "xfs" {
		force = "-f"
	}
	return exec.Command("mkfs."+fsType, force, img).CombinedOutput()
}

// TestMinSizeIsWhatMkfsFormats checks MinSize against the installed mkfs
// itself: it formats MinSize bytes and refuses one MiB less, and for xfs
// the refusal names the same minimum.
func TestMinSizeIsWhatMkfsFormats(t *testing.T) {
	for _, fs := range []struct{ name, tool, pkg string }{
		{"xfs", "mkfs.xfs", "xfsprogs"},
		{"ext4", "mkfs.ext4", "e2fsprogs"},
	} {
		t.Run(fs.name, func(t *testing.T) {
			requireTool(t, fs.tool, fs.pkg)
			n, err := mount.New(mount.Options{}).MinSize(context.Background(), fs.name)
			if err != nil {
				t.Fatal(err)
			}
			if n <= 0 || n%mib != 0 {
				t.Fatalf("MinSize = %d, want a positive whole number of MiB", n)
			}
			if out, err := mkfsFile(t, fs.name, n); err != nil {
				t.Fatalf("mkfs.%s refuses MinSize's %d bytes: %v\n%s", fs.name, n, err, out)
			}
			if n == mib {
				return // the search's floor: nothing smaller is tried
			}
			out, err := mkfsFile(t, fs.name, n-mib)
			if err == nil {
				t.Fatalf("mkfs.%s formats %d bytes, less than MinSize's %d", fs.name, n-mib, n)
			}
			if fs.name == "xfs" && !strings.Contains(string(out), fmt.Sprintf("larger than %dMB", n/mib)) {
				t.Errorf("mkfs.xfs's refusal does not name MinSize's %d MiB:\n%s", n/mib, out)
			}
		})
	}
}

// TestMinSizeSearchesOnce runs MinSize from many goroutines: one search
// (a bounded number of mkfs runs), the same answer for all, none later,
// and no probe file left behind.
func TestMinSizeSearchesOnce(t *testing.T) {
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var runs atomic.Int64
	real := mount.ExecRunner()
	m := mount.New(mount.Options{Runner: mount.RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
		runs.Add(1)
		return real.Run(ctx, name, args...)
	})})
	var wg sync.WaitGroup
	got := make([]int64, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := m.MinSize(context.Background(), "ext4")
			if err != nil {
				t.Error(err)
			}
			got[i] = n
		}()
	}
	wg.Wait()
	for _, n := range got[1:] {
		if n != got[0] {
			t.Fatalf("answers differ: %v", got)
		}
	}
	// One run at the ceiling plus log2(4096) bisection steps.
	if r := runs.Load(); r < 1 || r > 13 {
		t.Errorf("%d mkfs runs for 8 concurrent calls, want one search (at most 13)", r)
	}
	before := runs.Load()
	if _, err := m.MinSize(context.Background(), "ext4"); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != before {
		t.Errorf("a second call ran mkfs again")
	}
	ents, err := os.ReadDir(tmp)
	if err != nil || len(ents) != 0 {
		t.Errorf("MinSize left %v behind in TMPDIR (err %v)", ents, err)
	}
}

const minSizeKillEnv = "CSIKIT_TEST_MINSIZE_KILLED"

// TestMinSizeKilledLeavesNothing runs a search in a child process that is
// killed with SIGKILL while mkfs formats its third probe: the child's
// TMPDIR must be empty afterwards (probes are unnamed files, gone with
// the process), where a named probe file in a directory of its own used
// to stay behind on every killed driver start.
func TestMinSizeKilledLeavesNothing(t *testing.T) {
	if dir := os.Getenv(minSizeKillEnv); dir != "" {
		var runs atomic.Int64
		real := mount.ExecRunner()
		m := mount.New(mount.Options{Runner: mount.RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
			out, err := real.Run(ctx, name, args...)
			if runs.Add(1) == 3 {
				// Tell the parent, then wait for its SIGKILL.
				if werr := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o600); werr != nil {
					t.Fatal(werr)
				}
				<-ctx.Done()
			}
			return out, err
		})})
		_, err := m.MinSize(context.Background(), "ext4")
		t.Fatalf("the search returned (%v); it should have been killed", err)
	}
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	tmp, signal := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMinSizeKilledLeavesNothing$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, minSizeKillEnv+"="+signal)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(signal, "ready")); err == nil {
			break
		}
		if i == 600 {
			t.Fatalf("the child never reached its third mkfs run:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("a killed search left %s in TMPDIR", e.Name())
	}
}

// TestMinSizeRefuses: a name that cannot be a file system never reaches
// a program; a file system with no mkfs is FailedPrecondition; a
// cancelled context is Canceled and not remembered.
func TestMinSizeRefuses(t *testing.T) {
	var ran atomic.Bool
	m := mount.New(mount.Options{Runner: mount.RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
		ran.Store(true)
		return mount.ExecRunner().Run(ctx, name, args...)
	})})
	for _, bad := range []string{"", "../../bin/sh", "ext4 -E x", "/xfs"} {
		_, err := m.MinSize(context.Background(), bad)
		wantCode(t, err, codes.InvalidArgument)
	}
	if ran.Load() {
		t.Fatal("an invalid file system name reached the runner")
	}
	_, err := m.MinSize(context.Background(), "nosuchfs")
	wantCode(t, err, codes.FailedPrecondition)
	if !strings.Contains(err.Error(), "mkfs.nosuchfs") {
		t.Errorf("error does not name the program: %v", err)
	}

	requireTool(t, "mkfs.ext4", "e2fsprogs")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = m.MinSize(ctx, "ext4")
	wantCode(t, err, codes.Canceled)
	if _, err := m.MinSize(context.Background(), "ext4"); err != nil {
		t.Errorf("after a cancelled search: %v", err)
	}
}

func TestFitSize(t *testing.T) {
	const min = 300 * mib
	for _, c := range []struct {
		req, lim, want int64
		code           codes.Code
	}{
		{req: 1 << 30, want: 1 << 30},
		{req: min, lim: min, want: min},
		{req: 64 * mib, want: min},
		{req: 64 * mib, lim: 1 << 30, want: min},
		{req: 0, lim: 0, want: min},
		{req: 64 * mib, lim: 100 * mib, code: codes.OutOfRange},
		{req: 0, lim: min - 1, code: codes.OutOfRange},
	} {
		got, err := mount.FitSize("xfs", c.req, c.lim, min)
		if c.code != codes.OK {
			wantCode(t, err, c.code)
			if !strings.Contains(err.Error(), fmt.Sprint(min)) {
				t.Errorf("FitSize(%d, %d): the error does not name the minimum: %v", c.req, c.lim, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("FitSize(%d, %d) = %d, %v; want %d", c.req, c.lim, got, err, c.want)
		}
	}
}

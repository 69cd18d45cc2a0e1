//go:build linux

package upstream_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/sanity"
)

// Environment of the test.
const (
	// binEnv names an already built hostpathplugin to test instead of
	// building one.
	binEnv = "CSIKIT_UPSTREAM_HOSTPATH_BIN"
	// srcEnv names a checkout of csi-driver-host-path at the version
	// hostpath/go.mod requires, used instead of the module proxy's copy.
	srcEnv = "CSIKIT_UPSTREAM_HOSTPATH_SRC"
	// childEnv marks the child process that runs the harness.
	childEnv = "CSIKIT_UPSTREAM_CHILD"
)

// TestUpstreamHostpath runs the harness against upstream
// csi-driver-host-path in a child process (a failing case cannot be
// observed in-process without failing this test) and compares the failing
// cases with expected_failures.txt, both ways: a case that fails but is
// not listed is a false alarm or a new upstream bug; a listed case that
// passes means the harness lost a check or upstream fixed the bug.
func TestUpstreamHostpath(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("the child runs TestUpstreamRun")
	}
	if os.Geteuid() != 0 {
		testenv.Skipf(t, "needs root: the driver mounts volumes and attaches loop devices")
	}
	bin := driverBinary(t)
	want, err := readExpected("expected_failures.txt")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestUpstreamRun$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+bin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("harness against upstream hostpath (mount and block) took %v", time.Since(start).Round(time.Millisecond))
	if strings.Contains(out.String(), "panic:") {
		t.Fatalf("the harness panicked:\n%s", out.String())
	}
	failLine := regexp.MustCompile(`--- FAIL: TestUpstreamRun/(\S+)`)
	var failed []string
	for _, m := range failLine.FindAllStringSubmatch(out.String(), -1) {
		failed = append(failed, m[1])
	}
	got := leafFailures(failed)
	if runErr == nil && len(want) > 0 {
		t.Errorf("the harness passed upstream hostpath clean, want the %d known bugs caught", len(want))
	}
	var unexpected, missing []string
	for _, c := range got {
		if _, ok := want[c]; !ok {
			unexpected = append(unexpected, c)
		}
	}
	for c, why := range want {
		switch {
		case slices.Contains(got, c):
		case strings.HasPrefix(why, intermittent):
			t.Logf("intermittent expected failure did not show this time: %s", c)
		default:
			missing = append(missing, c+" ("+why+")")
		}
	}
	t.Logf("%d cases failed, as expected_failures.txt lists", len(got))
	sort.Strings(missing)
	if len(unexpected) > 0 || len(missing) > 0 {
		t.Errorf("failing cases differ from expected_failures.txt:\n\tfailed, not listed (false alarm or new upstream bug: list it with the bug, or fix the harness): %v\n\tlisted, passed (the harness lost a check, or upstream fixed the bug): %v\n\nharness output:\n%s",
			unexpected, missing, out.String())
	}
	if runErr != nil && len(got) == 0 {
		t.Errorf("the harness failed without a failing case: %v\n%s", runErr, out.String())
	}
}

// TestUpstreamRun is the child: sanity.Run against the driver binary
// named by $CSIKIT_UPSTREAM_CHILD, by endpoint, with Restart and Log.
func TestUpstreamRun(t *testing.T) {
	bin := os.Getenv(childEnv)
	if bin == "" {
		t.Skip("run by TestUpstreamHostpath in a child process")
	}
	d := startDriver(t, bin)
	sanity.Run(t, sanity.Endpoint("unix://"+d.sock), sanity.Config{
		AccessType: sanity.BothAccess,
		VolumeSize: 16 << 20,
		ExpandSize: 32 << 20,
		Restart:    d.restart,
		Log:        d.log.Bytes,
		Skip: map[string]string{
			// Its mount volumes are directories that report the node
			// filesystem's usage, which other processes on a shared
			// machine change while the case writes: pass or fail would
			// depend on the machine's load, not on the driver.
			"mount/DataPath/stats_track_writes": "upstream reports the usage of the node's filesystem, which other processes change concurrently",
		},
	})
}

// driver is a running hostpathplugin process.
type driver struct {
	t    *testing.T
	bin  string
	dir  string
	sock string
	log  *sanity.LogBuffer
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan error
}

// startDriver starts bin on a fresh state directory; it is stopped when
// the test ends.
func startDriver(t *testing.T, bin string) *driver {
	dir, err := os.MkdirTemp("", "hp-up") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{t: t, bin: bin, dir: dir, sock: filepath.Join(dir, "csi.sock"), log: &sanity.LogBuffer{}}
	t.Cleanup(func() {
		d.stop()
		os.RemoveAll(dir)
	})
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d *driver) start() error {
	cmd := exec.Command(d.bin, "--endpoint=unix://"+d.sock, "--nodeid=upstream-node",
		"--statedir="+filepath.Join(d.dir, "state"), "--v=5")
	cmd.Stdout, cmd.Stderr = d.log, d.log
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	d.mu.Lock()
	d.cmd, d.done = cmd, done
	d.mu.Unlock()
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(d.sock); err == nil {
			return nil
		}
		select {
		case err := <-done:
			b, _ := d.log.Bytes()
			return fmt.Errorf("hostpathplugin exited: %v\n%s", err, b)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return errors.New("hostpathplugin did not create its socket within 5 s")
}

// stop ends the process this test started, by its PID.
func (d *driver) stop() {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.cmd = nil
	d.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	_ = os.Remove(d.sock)
}

// restart is Config.Restart: stop the driver and start it on the same
// state directory.
func (d *driver) restart(context.Context) error {
	d.stop()
	return d.start()
}

// intermittent starts the bug text of an expected failure that shows
// only in some interleavings of concurrent calls: the case may pass.
const intermittent = "(intermittent) "

// readExpected reads "case<spaces>bug" lines; # starts a comment.
func readExpected(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c, why, ok := strings.Cut(line, " ")
		why = strings.TrimSpace(why)
		if !ok || why == "" {
			return nil, fmt.Errorf("%s:%d: want a case and the upstream bug it reflects, got %q", path, n, line)
		}
		out[c] = why
	}
	return out, sc.Err()
}

// leafFailures drops the groups from a list of failed test names.
func leafFailures(failed []string) []string {
	var out []string
	for _, f := range failed {
		leaf := true
		for _, g := range failed {
			if strings.HasPrefix(g, f+"/") {
				leaf = false
				break
			}
		}
		if leaf && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

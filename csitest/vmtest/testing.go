//go:build linux

package vmtest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/csikit/csikit/internal/testenv"
)

// InGuest reports whether this process runs in a vmtest guest.
func InGuest() bool { return os.Getenv(GuestEnv) == "1" }

var (
	vmsMu   sync.Mutex
	vms     = map[string]*VM{}
	bootErr = map[string]error{}
	mainRan bool
)

// Main runs a package's tests (call it from TestMain: os.Exit(vmtest.Main(m)))
// and then powers off the VMs Delegate booted, which the package's tests
// share (one per distinct Options).
func Main(m *testing.M) int {
	vmsMu.Lock()
	mainRan = true
	vmsMu.Unlock()
	code := m.Run()
	vmsMu.Lock()
	defer vmsMu.Unlock()
	for k, v := range vms {
		if !InGuest() && testing.Verbose() {
			fmt.Printf("vmtest: VM booted in %v (%s)\n", v.BootTime.Round(time.Millisecond), accelName(v.Lane))
		}
		_ = v.Close()
		delete(vms, k)
	}
	return code
}

func accelName(l Lane) string {
	if l.KVM {
		return "KVM"
	}
	return "TCG"
}

// strict reports whether a missing lane must fail the test (CI).
func strict() bool {
	v := os.Getenv("CSIKIT_STRICT_TESTS")
	return os.Getenv("CI") == "true" || (v != "" && v != "0")
}

// Delegate runs the calling test in the VM, unless it already runs there.
// On the host it boots (or reuses) the VM for opts, runs this test binary
// there with -test.run naming exactly this test, streams the guest's
// output into the test's log, makes the guest's result this test's
// (failed, skipped with the guest's reason, or passed) and reports true:
// the caller returns at once. In the guest it reports false and the test
// goes on, on the guest's kernel. Call it first in the test (what runs
// before it runs on the host too). Without the lane the test skips, or
// fails under CSIKIT_STRICT_TESTS=1 or CI=true. The package's TestMain
// must call Main.
func Delegate(t *testing.T, opts Options) bool {
	t.Helper()
	if InGuest() {
		return false
	}
	lane, err := Available()
	if err != nil {
		if strict() {
			t.Fatalf("CSIKIT_STRICT_TESTS/CI forbid this skip: this test runs in a VM: %v", err)
		}
		t.Skipf("this test runs in a VM: %v", err)
	}
	vmsMu.Lock()
	if !mainRan {
		vmsMu.Unlock()
		t.Fatal("vmtest.Delegate: the package's TestMain must call vmtest.Main (it powers the VMs off)")
	}
	key := opts.key()
	v, err := vms[key], bootErr[key]
	if v == nil && err == nil {
		for k, old := range vms { // one VM at a time: memory is shared
			_ = old.Close()
			delete(vms, k)
		}
		ctx := context.Background()
		v, err = Start(ctx, opts)
		if err != nil {
			bootErr[key] = err
		} else {
			vms[key] = v
			t.Logf("vmtest: booted %s under %s in %v, ready for the first test %v later (modules, udev, setup)",
				v.Lane.KernelVersion, accelName(v.Lane), v.BootTime.Round(time.Millisecond), v.SetupTime.Round(time.Millisecond))
			if v.KVMError != nil {
				t.Logf("vmtest: KVM not used: %v", v.KVMError)
			}
		}
	}
	vmsMu.Unlock()
	if err != nil {
		t.Fatalf("the VM for this test did not start: %v", err)
	}
	args := []string{os.Args[0], "-test.run=" + guestPattern(t.Name()), "-test.v=true", "-test.count=1"}
	if f := flag.Lookup("test.skip"); f != nil && f.Value.String() != "" {
		args = append(args, "-test.skip="+f.Value.String())
	}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	if f := flag.Lookup("test.timeout"); f != nil && f.Value.String() != "0s" {
		args = append(args, "-test.timeout="+f.Value.String())
	}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
	}
	wd, _ := os.Getwd()
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "TMPDIR" && k != "PATH" && k != "HOME" {
			env = append(env, kv)
		}
	}
	lw := &lineLogger{t: t}
	res, err := v.Run(ctx, Command{Argv: args, Dir: wd, Env: env, Output: lw})
	lw.flush()
	if err != nil {
		vmsMu.Lock()
		if vms[key] == v {
			delete(vms, key)
			bootErr[key] = fmt.Errorf("the VM failed in an earlier test: %w", err)
		}
		vmsMu.Unlock()
		t.Fatalf("in the VM: %v", err)
	}
	switch verdict(res.Output, t.Name()) {
	case "PASS":
		if res.ExitCode != 0 {
			t.Fatalf("in the VM: the test passed but the binary exited %d", res.ExitCode)
		}
	case "SKIP":
		t.Skip("skipped in the VM (its reason is in the log above)")
	case "FAIL":
		t.Fatalf("failed in the VM (%s, exit %d)", lane.KernelVersion, res.ExitCode)
	default:
		t.Fatalf("the VM ran no test named %s (exit %d)", t.Name(), res.ExitCode)
	}
	return true
}

// runPattern is the -test.run pattern matching exactly the test named
// name (subtest elements anchored one by one).
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// guestPattern is runPattern(name) plus the elements of this run's
// -test.run below name's depth, so `go test -run TestX/sub` runs only
// sub in the guest too.
func guestPattern(name string) string {
	p := runPattern(name)
	f := flag.Lookup("test.run")
	if f == nil || f.Value.String() == "" {
		return p
	}
	parts := strings.Split(f.Value.String(), "/")
	if depth := strings.Count(name, "/") + 1; len(parts) > depth {
		p += "/" + strings.Join(parts[depth:], "/")
	}
	return p
}

// verdict finds the result line of test name in go test -v output.
func verdict(out []byte, name string) string {
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		for _, v := range []string{"PASS", "FAIL", "SKIP"} {
			if strings.HasPrefix(l, "--- "+v+": "+name+" (") {
				return v
			}
		}
	}
	return ""
}

// lineLogger writes the guest's output to the test's log, line by line.
type lineLogger struct {
	t   *testing.T
	buf bytes.Buffer
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.buf.Write(p)
	for {
		i := bytes.IndexByte(l.buf.Bytes(), '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log("vm| " + string(l.buf.Next(i + 1)[:i]))
	}
}

func (l *lineLogger) flush() {
	if l.buf.Len() > 0 {
		l.t.Log("vm| " + l.buf.String())
		l.buf.Reset()
	}
}

// KernelLacks reports whether the running kernel was provably built
// without one of the named options (CONFIG_…), as /proc/config.gz or
// /boot/config-$(uname -r) says: the test then needs the VM. An option the
// kernel's config cannot tell about does not count.
func KernelLacks(options ...string) bool {
	for _, o := range options {
		if v, ok := testenv.KernelOption(o); ok && v == "" {
			return true
		}
	}
	return false
}

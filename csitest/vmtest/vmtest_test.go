//go:build linux

package vmtest_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csikit/csikit/csitest/vmtest"
	"github.com/csikit/csikit/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(vmtest.Main(m)) }

// TestDelegate runs in the VM: the guest's kernel is Debian's (modules
// loaded from the host's /lib/modules), the process is root with every
// capability, the host's root is read-only, TMPDIR is writable, and the
// only network interface is loopback.
func TestDelegate(t *testing.T) {
	if vmtest.Delegate(t, vmtest.Options{Modules: []string{"loop", "xfs"}}) {
		return
	}
	if !vmtest.InGuest() {
		t.Fatal("Delegate returned false outside the guest")
	}
	mods, err := os.ReadFile("/proc/modules")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(mods, []byte("xfs ")) {
		t.Errorf("xfs is not loaded: %s", mods)
	}
	status, _ := os.ReadFile("/proc/self/status")
	if !strings.Contains(string(status), "CapEff:\t000001ffffffffff") {
		t.Errorf("not every capability: %s", status)
	}
	if err := os.WriteFile("/etc/vmtest-probe", nil, 0o600); err == nil {
		t.Error("wrote to the host's root: it must be read-only in the guest")
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "f"), []byte("x"), 0o600); err != nil {
		t.Errorf("TMPDIR: %v", err)
	}
	ifs, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Name() != "lo" {
			t.Errorf("network interface %s in the guest: want loopback only", i.Name())
		}
	}
}

// TestDelegateReportsFailure: a test that fails in the guest fails on the
// host (run as a child, so the failure is the child's).
func TestDelegateReportsFailure(t *testing.T) {
	if os.Getenv("VMTEST_FAILING_CHILD") == "" {
		if !vmtest.InGuest() {
			t.Skip("exercised by TestVMRun's child run")
		}
	}
	if vmtest.Delegate(t, vmtest.Options{}) {
		return
	}
	t.Fatal("failing on purpose in the guest")
}

// TestVMRun boots a VM, runs commands in it and checks their output and
// exit codes, Setup's environment and the shared scratch directory.
func TestVMRun(t *testing.T) {
	if vmtest.InGuest() {
		t.Skip("host side only")
	}
	if _, err := vmtest.Available(); err != nil {
		testenv.Skip(t, err.Error())
	}
	ctx := context.Background()
	vm, err := vmtest.Start(ctx, vmtest.Options{Setup: `echo "GREETING=hello from setup" >>"$VMTEST_ENV"`})
	if err != nil {
		t.Fatal(err)
	}
	defer vm.Close()
	t.Logf("boot to agent: %v (KVM %v; KVM not used: %v)", vm.BootTime, vm.Lane.KVM, vm.KVMError)
	if !vm.Lane.KVM && vm.KVMError == nil {
		t.Error("a TCG guest without KVMError: it must say why KVM was not used")
	}
	res, err := vm.Run(ctx, vmtest.Command{Argv: []string{"bash", "-c", `echo "$GREETING"; uname -r; echo out >` + vm.Scratch() + `/f; exit 3`}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 {
		t.Errorf("exit code %d, want 3", res.ExitCode)
	}
	if want := "hello from setup\n" + vm.Lane.KernelVersion + "\n"; string(res.Output) != want {
		t.Errorf("output %q, want %q", res.Output, want)
	}
	if b, err := os.ReadFile(filepath.Join(vm.Scratch(), "f")); err != nil || string(b) != "out\n" {
		t.Errorf("scratch file from the guest: %q, %v", b, err)
	}
	res, err = vm.Run(ctx, vmtest.Command{Argv: []string{"/nonexistent"}})
	if err == nil {
		t.Errorf("a missing program: got %+v, want an error", res)
	}
	// This binary's TestDelegateReportsFailure, run in the guest, fails.
	res, err = vm.Run(ctx, vmtest.Command{Argv: []string{os.Args[0], "-test.run=^TestDelegateReportsFailure$", "-test.v"},
		Env: []string{"VMTEST_FAILING_CHILD=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 1 || !strings.Contains(string(res.Output), "failing on purpose in the guest") {
		t.Errorf("a failing test in the guest: exit %d, output %s", res.ExitCode, res.Output)
	}
}

package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestStrictTurnsSkipIntoFailure(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		Skip(t, "the child's reason")
		return
	}
	for _, strict := range []string{"", "1"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStrictTurnsSkipIntoFailure$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", StrictEnv+"="+strict)
		out, err := cmd.CombinedOutput()
		switch {
		case strict == "" && (err != nil || !strings.Contains(string(out), "--- SKIP")):
			t.Errorf("not strict: want a skip, got err=%v\n%s", err, out)
		case strict == "1" && (err == nil || !strings.Contains(string(out), "forbids this skip: the child's reason")):
			t.Errorf("strict: want a failure naming the reason, got err=%v\n%s", err, out)
		}
	}
}

func TestHasCapabilityReadsStatus(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status on this system")
	}
	has, ok := HasCapability(CapSysAdmin)
	if !ok {
		t.Fatal("CapEff not read from /proc/self/status")
	}
	if os.Geteuid() != 0 && has {
		t.Log("non-root process holds CAP_SYS_ADMIN (ambient capabilities)")
	}
}

func TestKernelOptionReadsConfig(t *testing.T) {
	if _, err := os.Stat("/proc/config.gz"); err != nil {
		t.Skip("no /proc/config.gz on this system")
	}
	// Every kernel that can run these tests has a /proc filesystem.
	if v, ok := KernelOption("CONFIG_PROC_FS"); !ok || v != "y" {
		t.Errorf("CONFIG_PROC_FS: got %q, %v, want y, true", v, ok)
	}
	if v, ok := KernelOption("CONFIG_CSIKIT_NO_SUCH_OPTION"); !ok || v != "" {
		t.Errorf("a missing option: got %q, %v, want \"\", true", v, ok)
	}
}

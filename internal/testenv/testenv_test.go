package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/csikit/csikit/caps"
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

func TestSkipWithoutCapability(t *testing.T) {
	has, err := caps.Has(caps.SysResource)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	t.Run("child", func(t *testing.T) {
		SkipWithoutCapability(t, caps.SysResource, "the test's reason")
		ran = true
	})
	if ran != has {
		t.Fatalf("ran %t with CAP_SYS_RESOURCE held %t: want it to run exactly when held", ran, has)
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

//go:build linux

package caps_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/csikit/csikit/caps"
)

// statusCapEff reads CapEff from /proc/self/status, the kernel's other
// account of the same set.
func statusCapEff(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return 0
}

// TestHasAgreesWithProc checks Has against /proc/self/status for every
// capability the kernel knows, held or not (this sandbox lacks
// CAP_SYS_RESOURCE; a privileged CI holds it: both answers are checked
// against the kernel, not assumed).
func TestHasAgreesWithProc(t *testing.T) {
	eff := statusCapEff(t)
	for c := caps.Cap(0); c <= 40; c++ {
		got, err := caps.Has(c)
		if err != nil {
			t.Fatalf("Has(%v): %v", c, err)
		}
		if want := eff&(1<<uint(c)) != 0; got != want {
			t.Errorf("Has(%v) = %t, /proc/self/status says %t", c, got, want)
		}
	}
	miss, err := caps.Missing(caps.SysAdmin, caps.SysResource)
	if err != nil {
		t.Fatal(err)
	}
	var want []caps.Cap
	for _, c := range []caps.Cap{caps.SysAdmin, caps.SysResource} {
		if eff&(1<<uint(c)) == 0 {
			want = append(want, c)
		}
	}
	if len(miss) != len(want) || (len(want) > 0 && strings.Join(names(miss), ",") != strings.Join(names(want), ",")) {
		t.Fatalf("Missing: got %v, want %v", miss, want)
	}
}

func names(cs []caps.Cap) []string {
	var s []string
	for _, c := range cs {
		s = append(s, c.String())
	}
	return s
}

func TestHasRejectsOutOfRange(t *testing.T) {
	for _, c := range []caps.Cap{-1, 64, 1000} {
		if ok, err := caps.Has(c); ok || err == nil {
			t.Errorf("Has(%d) = %t, %v: want false and an error", int(c), ok, err)
		}
	}
}

func TestNames(t *testing.T) {
	for c, want := range map[caps.Cap]string{caps.SysResource: "CAP_SYS_RESOURCE", caps.SysAdmin: "CAP_SYS_ADMIN", 38: "CAP_38"} {
		if got := c.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(c), got, want)
		}
	}
	if got := caps.SysResource.Kubernetes(); got != "SYS_RESOURCE" {
		t.Errorf("Kubernetes() = %q, want SYS_RESOURCE", got)
	}
}

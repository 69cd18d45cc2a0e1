//go:build linux

package vmtest

import "testing"

func TestRunPattern(t *testing.T) {
	for name, want := range map[string]string{
		"TestX":           "^TestX$",
		"TestX/a.b/c_(d)": `^TestX$/^a\.b$/^c_\(d\)$`,
	} {
		if got := runPattern(name); got != want {
			t.Errorf("runPattern(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestVerdict(t *testing.T) {
	out := []byte("=== RUN   TestX\n    --- PASS: TestX/sub (0.00s)\n--- FAIL: TestXY (0.01s)\n--- SKIP: TestX (0.00s)\n")
	for name, want := range map[string]string{"TestX": "SKIP", "TestX/sub": "PASS", "TestXY": "FAIL", "TestZ": ""} {
		if got := verdict(out, name); got != want {
			t.Errorf("verdict(%q) = %q, want %q", name, got, want)
		}
	}
}

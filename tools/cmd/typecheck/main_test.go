package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// module writes a module of the given files into a temporary directory.
func module(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module example.com/m\n\ngo 1.22\n"
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestPlatformErrors: an error only the named platform's files have is
// found for that platform, in code and in tests, and not for another.
func TestPlatformErrors(t *testing.T) {
	t.Setenv("GOWORK", "off")
	dir := module(t, map[string]string{
		"a/a.go":              "package a\n\nfunc A() int { return 1 }\n",
		"a/a_windows.go":      "package a\n\nvar _ = undefinedOnWindows\n",
		"b/b.go":              "package b\n",
		"b/b_darwin_test.go":  "package b\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) { var unused int }\n",
		"c/c.go":              "package c\n\nimport \"example.com/m/a\"\n\nvar C = a.A()\n",
		"c/c_linux.go":        "package c\n\nimport \"os\"\n",
		"c/c_linux_test.go":   "package c\n",
		"d/d_windows_test.go": "package d_test\n",
	})
	for _, tc := range []struct {
		goos string
		rc   int
		want []string // in stderr
	}{
		{"windows", 1, []string{"a_windows.go:3:9: undefined: undefinedOnWindows"}},
		{"darwin", 1, []string{"b_darwin_test.go:5:32: declared and not used: unused"}},
		{"linux", 1, []string{`c_linux.go:3:8: "os" imported and not used`}},
		{"freebsd", 0, nil},
	} {
		t.Run(tc.goos, func(t *testing.T) {
			t.Setenv("GOOS", tc.goos)
			t.Setenv("GOARCH", "amd64")
			var out, errOut bytes.Buffer
			rc := run(dir, []string{"./..."}, &out, &errOut)
			if rc != tc.rc {
				t.Fatalf("rc = %d, want %d; stderr:\n%s", rc, tc.rc, errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut.String())
				}
			}
			if tc.rc == 0 && !strings.Contains(out.String(), "no errors ("+tc.goos+"/amd64)") {
				t.Errorf("stdout = %q", out.String())
			}
		})
	}
}

// TestNoPackages: a pattern that matches nothing is an error, not a pass.
func TestNoPackages(t *testing.T) {
	t.Setenv("GOWORK", "off")
	dir := module(t, map[string]string{"a/a.go": "package a\n"})
	var out, errOut bytes.Buffer
	if rc := run(dir, []string{"./nothing/..."}, &out, &errOut); rc == 0 {
		t.Fatalf("rc = 0 for a pattern matching nothing; stdout %q", out.String())
	}
}

package csikit_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestNestedModulesHaveTargets: make test runs `go test ./...`, which stops
// at every nested go.mod. So that no module is skipped in silence, each
// nested module must be listed in the Makefile's NESTED_MODULES (which
// make test names when it ends), have a `make test-<name>` target, and be
// named in the README; a go.mod below a listed module is one of its tool
// modules, built by its run.
func TestNestedModulesHaveTargets(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^NESTED_MODULES :?= (.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no NESTED_MODULES line")
	}
	listed := strings.Fields(string(m[1]))
	var found []string
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.Name() == "go.mod" && p != "go.mod" {
			found = append(found, filepath.ToSlash(filepath.Dir(p)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range found {
		covered := slices.ContainsFunc(listed, func(l string) bool { return dir == l || strings.HasPrefix(dir, l+"/") })
		if !covered {
			t.Errorf("%s/go.mod: a nested module make test does not run and the Makefile does not list: add it to NESTED_MODULES with a make test-%s target", dir, filepath.Base(dir))
		}
	}
	for _, dir := range listed {
		if !slices.Contains(found, dir) {
			t.Errorf("Makefile: NESTED_MODULES lists %s, which has no go.mod", dir)
		}
		target := "test-" + filepath.Base(dir)
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(mk) {
			t.Errorf("Makefile: no %s target for the nested module %s", target, dir)
		}
		if !strings.Contains(string(readme), "make "+target) {
			t.Errorf("README.md does not mention make %s (the nested module %s)", target, dir)
		}
	}
}

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

// TestWorkspaceCoversNestedModules: a nested module requires csikit's
// modules at a release version with no replace, so it builds against the
// tree only through go.work. Each module that requires a csikit module must
// be a `use` of go.work, have no replace of a csikit module in its go.mod,
// and go.work must stand in (a version-pinned replace) for exactly the
// version it requires; see scripts/release.sh.
func TestWorkspaceCoversNestedModules(t *testing.T) {
	work, err := os.ReadFile("go.work")
	if err != nil {
		t.Fatal(err)
	}
	uses := map[string]bool{}
	replaces := map[string]string{} // module path → version go.work replaces
	inUse := false
	for _, line := range strings.Split(string(work), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0 || strings.HasPrefix(f[0], "//"):
		case f[0] == "use" && len(f) == 2 && f[1] == "(":
			inUse = true
		case inUse && f[0] == ")":
			inUse = false
		case inUse:
			uses[filepath.Clean(f[0])] = true
		case f[0] == "use":
			uses[filepath.Clean(f[1])] = true
		case f[0] == "replace" && len(f) >= 5 && f[3] == "=>":
			replaces[f[1]] = f[2]
		}
	}
	reqRE := regexp.MustCompile(`(?m)^(?:require\s+|\s+)(github\.com/csikit/csikit\S*)\s+(v\S+)`)
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.Name() != "go.mod" || p == "go.mod" {
			return nil
		}
		dir := filepath.Dir(p)
		mod, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if regexp.MustCompile(`(?m)^replace\s+github\.com/csikit/|^\s+github\.com/csikit/\S*(\s+v\S+)?\s+=>`).Match(mod) {
			t.Errorf("%s replaces a csikit module: a vendor ignores it; go.work stands in for the tree", p)
		}
		for _, m := range reqRE.FindAllStringSubmatch(string(mod), -1) {
			if !uses[dir] {
				t.Errorf("%s requires %s but go.work does not use ./%s", p, m[1], dir)
			}
			if replaces[m[1]] != m[2] {
				t.Errorf("%s requires %s %s; go.work replaces it at %q (scripts/release.sh prepare %s sets both)", p, m[1], m[2], replaces[m[1]], m[2])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !uses["."] {
		t.Errorf("go.work does not use the root module")
	}
}

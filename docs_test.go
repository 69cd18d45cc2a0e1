package csikit_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// modulePackages returns the directories of the root module that hold a
// Go package (a non-test .go file), slash-separated and relative to the
// module root; nested modules, testdata and hidden directories are not
// part of it.
func modulePackages(t *testing.T) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || path == "." {
			return nil
		}
		name := d.Name()
		if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
			return filepath.SkipDir
		}
		files, _ := filepath.Glob(filepath.Join(path, "*.go"))
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				pkgs = append(pkgs, filepath.ToSlash(path))
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages (%v): not run from the module root?", len(pkgs), pkgs)
	}
	return pkgs
}

// architectureRows returns the paths of ARCHITECTURE.md's package map (the
// first cell of each table row), without a trailing slash.
func architectureRows(t *testing.T, text string) []string {
	t.Helper()
	row := regexp.MustCompile("(?m)^\\| `([^`]+)`")
	var rows []string
	for _, m := range row.FindAllStringSubmatch(text, -1) {
		rows = append(rows, strings.TrimSuffix(m[1], "/"))
	}
	if len(rows) < 10 {
		t.Fatalf("ARCHITECTURE.md's package map has %d rows; did its format change?", len(rows))
	}
	return rows
}

// mdFiles returns the base names of the Markdown files in the repository.
func mdFiles(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			names[d.Name()] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestArchitectureMapsEveryPackage keeps ARCHITECTURE.md's package map
// true: every package of the module has a row (its own, or one of a parent
// directory other than the root), every row names a directory that exists,
// and every Markdown file it names is in the repository.
func TestArchitectureMapsEveryPackage(t *testing.T) {
	b, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	rows := architectureRows(t, text)
	for _, r := range rows {
		if r == "" {
			continue // the root package's row
		}
		if fi, err := os.Stat(r); err != nil || !fi.IsDir() {
			t.Errorf("ARCHITECTURE.md maps %s, which is not a directory of the repository", r)
		}
	}
	for _, p := range modulePackages(t) {
		mapped := false
		for dir := p; dir != "." && !mapped; dir = filepath.ToSlash(filepath.Dir(dir)) {
			mapped = slices.Contains(rows, dir)
		}
		if !mapped {
			t.Errorf("package %s has no row in ARCHITECTURE.md's package map: add one saying what it is for", p)
		}
	}
	checkMarkdownNames(t, "ARCHITECTURE.md", text)
}

// TestPackageDocNamesThePackages keeps the root package's doc comment
// (doc.go) true: every package path it names exists, every public package
// of the module is named, and every Markdown file it names exists.
func TestPackageDocNamesThePackages(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	words := map[string]bool{}
	for _, w := range regexp.MustCompile(`[A-Za-z0-9_./-]+`).FindAllString(doc, -1) {
		w = strings.TrimRight(w, "./")
		words[w] = true
		if strings.Contains(w, "/") && !strings.HasPrefix(w, "/") { // /healthz is a URL path
			if fi, err := os.Stat(w); err != nil || !fi.IsDir() {
				t.Errorf("doc.go names %s, which is not a directory of the repository", w)
			}
		}
	}
	for _, p := range modulePackages(t) {
		if strings.HasPrefix(p, "internal/") || strings.Contains(p, "/internal/") || strings.HasPrefix(p, "examples/") {
			continue
		}
		if !words[p] {
			t.Errorf("doc.go does not name package %s: say in a few words what it is for", p)
		}
	}
	checkMarkdownNames(t, "doc.go", doc)
}

// checkMarkdownNames fails for every X.md that text names and the
// repository does not hold.
func checkMarkdownNames(t *testing.T, where, text string) {
	t.Helper()
	have := mdFiles(t)
	for _, m := range regexp.MustCompile(`[A-Za-z0-9_-]+\.md\b`).FindAllString(text, -1) {
		if !have[m] {
			t.Errorf("%s names %s, which is not in the repository", where, m)
		}
	}
}

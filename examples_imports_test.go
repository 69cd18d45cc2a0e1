package csikit_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// copyableExamples are the examples a vendor may copy out of this tree
// whole, tests included: none of their files may import a csikit
// internal package, which Go refuses to build outside the module.
// examples/hostpath/driver, the reference driver a vendor forks, is one:
// its tests travel with it.
var copyableExamples = []string{"examples/minimal", "examples/tmpfs", "examples/hostpath/driver"}

// forkableDrivers are packages meant to be copied without their tests
// (which may still use csikit's internal test support): their code itself
// must build outside the module. examples/hostpath's tests are the
// binary's (flags, startup, kill -9 restarts). examples/rbd is a module of
// its own and checked the same way by its own build.
var forkableDrivers = []string{"examples/hostpath"}

// TestCopyableExamplesImportNoInternal reads the imports of every .go file
// (tests too) of the copyable examples and fails on a
// github.com/csikit/csikit/internal/ one: what the examples' tests need
// from csikit's test support is public (csitest.RequireRoot, Build,
// StartProcess; sanity).
func TestCopyableExamplesImportNoInternal(t *testing.T) {
	dirs := append(slices.Clone(copyableExamples), forkableDrivers...)
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			if slices.Contains(forkableDrivers, dir) && strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if strings.HasPrefix(path, "github.com/csikit/csikit/") && (strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")) {
					t.Errorf("%s imports %s: a copy of the example outside csikit's module cannot build it; use a public package (csitest, sanity) or make what it needs public", f, path)
				}
			}
		}
	}
}

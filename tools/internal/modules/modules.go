// Package modules finds the released modules of a csikit checkout, by the
// same rule as scripts/release.sh: every go.mod below the root outside
// testdata and hidden directories, except one with the line
// "// csikit: unreleased".
package modules

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
)

// Unreleased is the go.mod line that keeps a module out of releases.
const Unreleased = "// csikit: unreleased"

// Module is one released module.
type Module struct {
	// Dir is the module's directory relative to the repository root, with
	// slashes; "." for the root module.
	Dir string
	// Path is the module path its go.mod declares.
	Path string
}

// TagPrefix is the prefix of the module's release tags: "" for the root
// module, "<Dir>/" for a nested one.
func (m Module) TagPrefix() string {
	if m.Dir == "." {
		return ""
	}
	return m.Dir + "/"
}

// Find returns the released modules under root, the root module first.
func Find(root string) ([]Module, error) {
	var mods []Module
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			if string(bytes.TrimSpace(line)) == Unreleased {
				return nil
			}
		}
		mp := modfile.ModulePath(data)
		if mp == "" {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		mods = append(mods, Module{Dir: filepath.ToSlash(rel), Path: mp})
		return nil
	})
	sort.Slice(mods, func(i, j int) bool {
		if (mods[i].Dir == ".") != (mods[j].Dir == ".") {
			return mods[i].Dir == "."
		}
		return mods[i].Dir < mods[j].Dir
	})
	return mods, err
}

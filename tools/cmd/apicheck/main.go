// Command apicheck compares the exported API of every released module of a
// csikit checkout with the previous release, with apidiff
// (golang.org/x/exp/apidiff), and fails on an incompatible change that
// CHANGELOG.md's Unreleased section does not name.
//
//	apicheck [-repo DIR] [-tags pacific] [-base REV]
//
// The previous release is the highest version among the repository's v*
// tags and the commits whose subject is "release: vX.Y.Z" (tags may not
// survive hosting; commits do), leaving out one at HEAD. With none, and no
// released section in CHANGELOG.md, there is nothing to compare; with a
// released section but no such tag or commit (a shallow clone), it fails.
//
// A change is named when the Unreleased section holds its symbol between
// backquotes: the package's directory in the repository (the root module's
// last path element for the root package), a dot and the object with its
// field or method, as apicheck prints it: `csikit.Options.LogLevel`,
// `sanity/kube.Options.BinDir`; a removed package by its directory alone.
// Commands (package main) and internal packages are not API. A module new
// since the baseline, or whose module path changed (a new major version),
// is not compared.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
	"golang.org/x/tools/go/packages"

	"github.com/csikit/csikit/tools/internal/modules"
)

func main() {
	repo := flag.String("repo", ".", "the repository root (a git work tree)")
	tags := flag.String("tags", "", "build tags to load packages with (comma-separated)")
	base := flag.String("base", "", "the revision to compare with (default: the previous release)")
	flag.Parse()
	ok, err := run(*repo, *tags, *base, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicheck:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// run checks repo against base (or the previous release) and reports to
// w; ok is false when an incompatible change is not named in CHANGELOG.md.
func run(repo, tags, base string, w io.Writer) (ok bool, err error) {
	repo, err = filepath.Abs(repo)
	if err != nil {
		return false, err
	}
	changelog, err := os.ReadFile(filepath.Join(repo, "CHANGELOG.md"))
	if err != nil {
		return false, err
	}
	baseName := base
	if base == "" {
		v, rev, err := previousRelease(repo)
		if err != nil {
			return false, err
		}
		if rev == "" && v != "" {
			fmt.Fprintf(w, "apicheck: HEAD is the first release (%s): nothing to compare\n", v)
			return true, nil
		}
		if rev == "" {
			if released.Match(changelog) {
				return false, errors.New("CHANGELOG.md has a released version but no v* tag or 'release: vX.Y.Z' commit was found (a shallow clone? fetch the history)")
			}
			fmt.Fprintln(w, "apicheck: no previous release: nothing to compare")
			return true, nil
		}
		base, baseName = rev, v
	}
	old, err := os.MkdirTemp("", "apicheck-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(old)
	extract := exec.Command("sh", "-c", `git archive --format=tar "$1" | tar -x -C "$2"`, "sh", base, old)
	extract.Dir = repo
	if out, err := extract.CombinedOutput(); err != nil {
		return false, fmt.Errorf("extract %s: %w: %s", base, err, out)
	}
	mods, err := modules.Find(repo)
	if err != nil {
		return false, err
	}
	rootPath := ""
	for _, m := range mods {
		if m.Dir == "." {
			rootPath = m.Path
		}
	}
	unreleased := unreleasedSection(string(changelog))
	ok = true
	for _, m := range mods {
		oldGoMod, err := os.ReadFile(filepath.Join(old, m.Dir, "go.mod"))
		if err != nil || modfile.ModulePath(oldGoMod) != m.Path {
			fmt.Fprintf(w, "apicheck: %s: new since %s: nothing to compare\n", m.Path, baseName)
			continue
		}
		oldAPI, err := load(old, m.Dir, tags)
		if err != nil {
			return false, fmt.Errorf("%s at %s: %w", m.Path, baseName, err)
		}
		newAPI, err := load(repo, m.Dir, tags)
		if err != nil {
			return false, fmt.Errorf("%s: %w", m.Path, err)
		}
		changes := diff(oldAPI, newAPI, rootPath)
		compatible, incompatible := 0, 0
		for _, c := range changes {
			if c.compatible {
				compatible++
			} else {
				incompatible++
			}
		}
		fmt.Fprintf(w, "apicheck: %s (%d packages): %d incompatible, %d compatible changes since %s\n", m.Path, len(newAPI), incompatible, compatible, baseName)
		for _, c := range changes {
			if c.compatible {
				continue
			}
			if strings.Contains(unreleased, "`"+c.symbol+"`") {
				fmt.Fprintf(w, "  named in CHANGELOG.md: `%s`: %s\n", c.symbol, c.message)
				continue
			}
			ok = false
			fmt.Fprintf(w, "  INCOMPATIBLE, not in CHANGELOG.md's Unreleased section: `%s`: %s\n", c.symbol, c.message)
		}
	}
	if !ok {
		fmt.Fprintln(w, "apicheck: name each incompatible change's symbol, between backquotes as printed, in CHANGELOG.md's Unreleased section (say what replaces it), or keep the old API")
	}
	return ok, nil
}

var (
	released    = regexp.MustCompile(`(?m)^## \[\d+\.\d+\.\d+[^\]]*\]`)
	releaseSubj = regexp.MustCompile(`^release: (v\S+)$`)
)

// previousRelease returns the highest released version and its commit
// among the v* tags and the "release: vX.Y.Z" commits, leaving out HEAD's;
// when HEAD's is the only one, its version and no commit.
func previousRelease(repo string) (version, rev string, err error) {
	head, err := git(repo, "rev-parse", "HEAD")
	if err != nil {
		return "", "", err
	}
	head = strings.TrimSpace(head)
	cands := map[string]string{} // version → commit
	tags, err := git(repo, "tag", "--list", "v*")
	if err != nil {
		return "", "", err
	}
	for _, t := range strings.Fields(tags) {
		if !semver.IsValid(t) {
			continue
		}
		c, err := git(repo, "rev-parse", "--verify", "refs/tags/"+t+"^{commit}")
		if err != nil {
			return "", "", err
		}
		cands[t] = strings.TrimSpace(c)
	}
	log, err := git(repo, "log", "--format=%H %s", "--grep=^release: v", "HEAD")
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		c, subj, _ := strings.Cut(line, " ")
		if m := releaseSubj.FindStringSubmatch(subj); m != nil && semver.IsValid(m[1]) {
			if _, tagged := cands[m[1]]; !tagged {
				cands[m[1]] = c
			}
		}
	}
	var vs []string
	atHead := ""
	for v, c := range cands {
		if c != head {
			vs = append(vs, v)
		} else {
			atHead = v
		}
	}
	if len(vs) == 0 {
		return atHead, "", nil
	}
	sort.Slice(vs, func(i, j int) bool { return semver.Compare(vs[i], vs[j]) > 0 })
	return vs[0], cands[vs[0]], nil
}

// unreleasedSection returns the text under "## [Unreleased]" up to the
// next "## " heading.
func unreleasedSection(changelog string) string {
	_, rest, found := strings.Cut(changelog, "\n## [Unreleased]")
	if !found {
		return ""
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// load type-checks the API packages of the module in tree/dir: not
// commands, not internal ones. A module its tree's go.work uses is loaded
// in that workspace (a nested module requires the root at the release
// version the workspace stands in for); any other with GOWORK=off.
func load(tree, dir, tags string) (map[string]*types.Package, error) {
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if ws := filepath.Join(tree, "go.work"); usesDir(ws, dir) {
		env = append(env, "GOWORK="+ws)
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedTypes | packages.NeedModule,
		Dir:  filepath.Join(tree, dir),
		Env:  env,
	}
	if tags != "" {
		cfg.BuildFlags = []string{"-tags", tags}
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, err
	}
	api := map[string]*types.Package{}
	var errs []string
	for _, p := range pkgs {
		if p.Name == "main" || isInternal(p.PkgPath) {
			continue
		}
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
		if p.Types != nil {
			api[p.PkgPath] = p.Types
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("loading packages: %s", strings.Join(errs, "; "))
	}
	return api, nil
}

func usesDir(goWork, dir string) bool {
	data, err := os.ReadFile(goWork)
	if err != nil {
		return false
	}
	wf, err := modfile.ParseWork(goWork, data, nil)
	if err != nil {
		return false
	}
	for _, u := range wf.Use {
		if path.Clean(filepath.ToSlash(u.Path)) == path.Clean(dir) {
			return true
		}
	}
	return false
}

func isInternal(p string) bool {
	return strings.HasSuffix(p, "/internal") || strings.Contains(p, "/internal/") || strings.HasPrefix(p, "internal/")
}

type change struct {
	symbol, message string
	compatible      bool
}

// diff lists the changes from old to new, package by package, with each
// change's symbol as CHANGELOG.md names it.
func diff(old, new map[string]*types.Package, rootPath string) []change {
	var out []change
	for p, op := range old {
		np, ok := new[p]
		if !ok {
			out = append(out, change{symbol: relPkg(p, rootPath), message: "package removed"})
			continue
		}
		for _, c := range apidiff.Changes(op, np).Changes {
			obj, _, _ := strings.Cut(c.Message, ": ")
			out = append(out, change{symbol: symbol(obj, p, rootPath), message: c.Message, compatible: c.Compatible})
		}
	}
	for p := range new {
		if _, ok := old[p]; !ok {
			out = append(out, change{symbol: relPkg(p, rootPath), message: "package added", compatible: true})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].symbol != out[j].symbol {
			return out[i].symbol < out[j].symbol
		}
		return out[i].message < out[j].message
	})
	return out
}

// relPkg is the package's directory in the repository, or the root
// module's last path element for the root package.
func relPkg(p, rootPath string) string {
	switch {
	case p == rootPath:
		return path.Base(rootPath)
	case strings.HasPrefix(p, rootPath+"/"):
		return strings.TrimPrefix(p, rootPath+"/")
	}
	return p
}

// symbol turns apidiff's object name (relative to pkg, or qualified by its
// package when it is another's; methods as "(*T).M") into pkg.T.M form.
func symbol(obj, pkg, rootPath string) string {
	obj = strings.NewReplacer("(*", "", ")", "").Replace(obj)
	if i := strings.LastIndex(obj, "/"); i >= 0 {
		// Qualified: "<import path>.<object>"; the path's last element
		// holds no dot after its slash for csikit's packages.
		j := strings.Index(obj[i:], ".")
		if j < 0 {
			return obj
		}
		return relPkg(obj[:i+j], rootPath) + obj[i+j:]
	}
	if strings.HasPrefix(obj, rootPath+".") {
		return path.Base(rootPath) + strings.TrimPrefix(obj, rootPath)
	}
	return relPkg(pkg, rootPath) + "." + obj
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

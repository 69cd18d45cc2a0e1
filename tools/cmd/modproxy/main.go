// Command modproxy writes a file:// Go module proxy holding every released
// module of a csikit checkout at one version, from that version's tags: for
// each module the .info, .mod and .zip files the go command fetches (the zip
// made from the tag's tree, as a proxy makes it from the repository) and the
// version list.
//
//	modproxy -repo DIR -version vX.Y.Z -out PROXYDIR [-worktree]
//
// Use it as GOPROXY=file://PROXYDIR (scripts/proxy-proof.sh does). With
// -worktree the modules are served from the work tree as it is, under
// the version given, with no tag: scripts/gomod.sh uses it to run go mod
// tidy or go get in a nested module before its required release is
// published.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"

	"github.com/csikit/csikit/tools/internal/modules"
)

func main() {
	repo := flag.String("repo", ".", "the repository (a git work tree) whose modules are served")
	version := flag.String("version", "", "the version to serve, tagged vX.Y.Z and <dir>/vX.Y.Z")
	out := flag.String("out", "", "the proxy directory to write")
	worktree := flag.Bool("worktree", false, "serve the work tree as it is, not the tags")
	flag.Parse()
	if *version == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	fromTree = *worktree
	if err := run(*repo, *version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(repo, version, out string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("%s is not a canonical semantic version", version)
	}
	repo, err := filepath.Abs(repo)
	if err != nil {
		return err
	}
	mods, err := modules.Find(repo)
	if err != nil {
		return err
	}
	for _, m := range mods {
		if err := write(repo, m, version, out); err != nil {
			return fmt.Errorf("%s@%s: %w", m.Path, version, err)
		}
		from := "tag " + m.TagPrefix() + version
		if fromTree {
			from = "work tree " + m.Dir
		}
		fmt.Printf("modproxy: %s@%s (%s)\n", m.Path, version, from)
	}
	return nil
}

// fromTree makes write serve the work tree instead of the tags.
var fromTree bool

// write puts m at version into the proxy directory out.
func write(repo string, m modules.Module, version, out string) error {
	if fromTree {
		dir := filepath.Join(repo, filepath.FromSlash(m.Dir))
		modFile, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return err
		}
		var zbuf bytes.Buffer
		if err := zip.CreateFromDir(&zbuf, module.Version{Path: m.Path, Version: version}, dir); err != nil {
			return err
		}
		return put(out, m, version, time.Now(), modFile, zbuf.Bytes())
	}
	tag := m.TagPrefix() + version
	rev, err := git(repo, "rev-parse", "--verify", "refs/tags/"+tag+"^{commit}")
	if err != nil {
		return fmt.Errorf("no tag %s: %w", tag, err)
	}
	rev = strings.TrimSpace(rev)
	ts, err := git(repo, "show", "-s", "--format=%cI", rev)
	if err != nil {
		return err
	}
	when, err := time.Parse(time.RFC3339, strings.TrimSpace(ts))
	if err != nil {
		return err
	}
	subdir := ""
	if m.Dir != "." {
		subdir = m.Dir
	}
	modFile, err := git(repo, "show", rev+":"+filepath.ToSlash(filepath.Join(subdir, "go.mod")))
	if err != nil {
		return err
	}
	var zbuf bytes.Buffer
	if err := zip.CreateFromVCS(&zbuf, module.Version{Path: m.Path, Version: version}, repo, rev, subdir); err != nil {
		return err
	}
	return put(out, m, version, when, []byte(modFile), zbuf.Bytes())
}

// put writes m's .info, .mod and .zip at version into the proxy directory
// out and adds version to its list.
func put(out string, m modules.Module, version string, when time.Time, modFile, zipData []byte) error {
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	escVer, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	dir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, when.UTC()})
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		escVer + ".info": info,
		escVer + ".mod":  modFile,
		escVer + ".zip":  zipData,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return addToList(filepath.Join(dir, "list"), version)
}

// addToList adds version to the proxy's version list file.
func addToList(list, version string) error {
	b, err := os.ReadFile(list)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, v := range strings.Fields(string(b)) {
		if v == version {
			return nil
		}
	}
	return os.WriteFile(list, append(b, version+"\n"...), 0o644)
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

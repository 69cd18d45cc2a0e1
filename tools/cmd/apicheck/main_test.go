package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("apicheck's tests need git: %v", err)
	}
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *repo) write(files map[string]string) {
	r.t.Helper()
	for name, body := range files {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *repo) git(args ...string) {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (r *repo) commit(msg string) {
	r.t.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", msg)
}

func (r *repo) check() (string, bool) {
	r.t.Helper()
	var out strings.Builder
	ok, err := run(r.dir, "", "", &out)
	if err != nil {
		r.t.Fatalf("apicheck: %v\n%s", err, out.String())
	}
	return out.String(), ok
}

const (
	libV1 = `package lib

// Options configure F.
type Options struct {
	A int
	B string
}

// F does nothing.
func F(x int) {}

// M does nothing.
func (o *Options) M() {}
`
	// The planted incompatible changes: a field and a method removed, a
	// parameter's type changed, a package removed; and an addition.
	libV2 = `package lib

// Options configure F.
type Options struct {
	A int
}

// F does nothing.
func F(x string) {}

// G is new.
func G() {}
`
	changelogHead = "# Changelog\n\n## [Unreleased]\n\n"
)

// planted is a repository whose v0.1.0 release commit (no tag: tags may not
// survive hosting) is followed by incompatible changes in the root module
// and in a nested one.
func planted(t *testing.T) *repo {
	r := newRepo(t)
	r.write(map[string]string{
		"go.mod":            "module example.com/lib\n\ngo 1.25.0\n",
		"lib.go":            libV1,
		"old/old.go":        "package old\n\n// X is gone in v2.\nconst X = 1\n",
		"internal/in/in.go": "package in\n\n// I is not API.\nfunc I() {}\n",
		"cmd/c/main.go":     "package main\n\n// Exported is not API in a command.\nfunc Exported() {}\n\nfunc main() {}\n",
		"sub/go.mod":        "module example.com/lib/sub\n\ngo 1.25.0\n",
		"sub/sub.go":        "package sub\n\n// H is removed next.\nfunc H() {}\n",
		"tools/go.mod":      "// csikit: unreleased\nmodule example.com/lib/tools\n\ngo 1.25.0\n",
		"tools/tools.go":    "package tools\n\n// T is never compared.\nfunc T() {}\n",
		"CHANGELOG.md":      changelogHead + "## [0.1.0] - 2026-01-01\n\n- First.\n",
	})
	r.commit("release: v0.1.0")
	r.write(map[string]string{
		"lib.go":            libV2,
		"internal/in/in.go": "package in\n\n// J replaces I.\nfunc J() {}\n",
		"cmd/c/main.go":     "package main\n\nfunc main() {}\n",
		"sub/sub.go":        "package sub\n\n// K replaces H.\nfunc K() {}\n",
		"tools/tools.go":    "package tools\n",
	})
	if err := os.RemoveAll(filepath.Join(r.dir, "old")); err != nil {
		t.Fatal(err)
	}
	r.commit("break the API")
	return r
}

var plantedSymbols = []string{"`lib.F`", "`lib.Options.B`", "`lib.Options.M`", "`old`", "`sub.H`"}

// TestPlantedIncompatibleChangeFails: each incompatible change is reported
// by its symbol and fails the check; additions, internal packages,
// commands and the unreleased module do not.
func TestPlantedIncompatibleChangeFails(t *testing.T) {
	r := planted(t)
	out, ok := r.check()
	t.Logf("apicheck:\n%s", out)
	if ok {
		t.Errorf("apicheck passed incompatible changes not in CHANGELOG.md:\n%s", out)
	}
	for _, s := range plantedSymbols {
		if !strings.Contains(out, "not in CHANGELOG.md's Unreleased section: "+s) {
			t.Errorf("output does not report %s as unnamed:\n%s", s, out)
		}
	}
	for _, s := range []string{"in.I", "Exported", "tools", "`lib.G`: "} {
		if strings.Contains(out, "INCOMPATIBLE, not in CHANGELOG.md's Unreleased section: `"+s) || strings.Contains(out, "example.com/lib/tools") {
			t.Errorf("output reports %q, which is not an incompatible API change of a released module:\n%s", s, out)
		}
	}
	if !strings.Contains(out, "since v0.1.0") {
		t.Errorf("baseline is not the release: v0.1.0 commit:\n%s", out)
	}
}

// TestNamedIncompatibleChangePasses: the same changes, each named in the
// Unreleased section, pass; one left out still fails.
func TestNamedIncompatibleChangePasses(t *testing.T) {
	r := planted(t)
	entry := "- Removed " + strings.Join(plantedSymbols, ", ") + " (use the replacements).\n\n"
	r.write(map[string]string{"CHANGELOG.md": changelogHead + entry + "## [0.1.0] - 2026-01-01\n\n- First.\n"})
	r.commit("changelog")
	if out, ok := r.check(); !ok {
		t.Errorf("apicheck failed with every change named:\n%s", out)
	}
	// Named only under a released section: not enough.
	partial := "- Removed `lib.F`.\n\n## [0.1.0] - 2026-01-01\n\n- " + strings.Join(plantedSymbols, ", ") + "\n"
	r.write(map[string]string{"CHANGELOG.md": changelogHead + partial})
	r.commit("changelog moved")
	out, ok := r.check()
	if ok || !strings.Contains(out, "section: `sub.H`") || strings.Contains(out, "section: `lib.F`") {
		t.Errorf("apicheck with only lib.F in Unreleased: ok=%v\n%s", ok, out)
	}
}

// TestBaselineTagOverCommitAndNotHead: the highest v* tag is the baseline
// when it is above the release commits; a release at HEAD is skipped for
// the one before it; no release at all, nothing to compare; a released
// CHANGELOG section with no tag or release commit fails; at the first
// release commit itself there is nothing to compare.
func TestBaselineTagOverCommitAndNotHead(t *testing.T) {
	r := planted(t)
	r.git("tag", "v0.1.1")
	if v, _, err := previousRelease(r.dir); err != nil || v != "v0.1.0" {
		t.Errorf("previousRelease with v0.1.1 tagged at HEAD = %q, %v; want v0.1.0 (HEAD left out)", v, err)
	}
	r.write(map[string]string{"README": "x\n"})
	r.commit("after")
	if v, _, err := previousRelease(r.dir); err != nil || v != "v0.1.1" {
		t.Errorf("previousRelease = %q, %v; want the tag v0.1.1", v, err)
	}

	fresh := newRepo(t)
	fresh.write(map[string]string{"go.mod": "module example.com/n\n\ngo 1.25.0\n", "n.go": "package n\n", "CHANGELOG.md": changelogHead})
	fresh.commit("start")
	if out, ok := fresh.check(); !ok || !strings.Contains(out, "no previous release") {
		t.Errorf("no release yet: ok=%v\n%s", ok, out)
	}
	fresh.write(map[string]string{"CHANGELOG.md": changelogHead + "## [0.1.0] - 2026-01-01\n"})
	fresh.commit("release: v0.1.0")
	if out, ok := fresh.check(); !ok || !strings.Contains(out, "HEAD is the first release (v0.1.0)") {
		t.Errorf("at the first release commit: ok=%v\n%s", ok, out)
	}
	fresh.write(map[string]string{"CHANGELOG.md": changelogHead + "## [0.2.0] - 2026-01-02\n"})
	fresh.commit("released elsewhere")
	fresh.git("reset", "-q", "--soft", "HEAD~2")
	fresh.commit("squashed: the release commit is gone")
	var out strings.Builder
	if _, err := run(fresh.dir, "", "", &out); err == nil || !strings.Contains(err.Error(), "shallow clone") {
		t.Errorf("released section without a tag or commit: err %v, want the shallow-clone error", err)
	}
}

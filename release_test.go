package csikit_test

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// releaseRepo is a throwaway repository shaped like this one: a root
// module, a nested module requiring it at v0.1.0 with go.work standing in
// for that version, an unreleased tools module, a CHANGELOG.md with an
// Unreleased entry, and this tree's scripts/release.sh.
type releaseRepo struct {
	t   *testing.T
	dir string
}

func newReleaseRepo(t *testing.T) *releaseRepo {
	t.Helper()
	for _, tool := range []string{"git", "go", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("release tests need %s: %v", tool, err)
		}
	}
	script, err := os.ReadFile("scripts/release.sh")
	if err != nil {
		t.Fatal(err)
	}
	r := &releaseRepo{t: t, dir: t.TempDir()}
	files := map[string]string{
		"go.mod":             "module github.com/csikit/csikit\n\ngo 1.25.0\n",
		"a.go":               "package csikit\n",
		"sub/go.mod":         "module github.com/csikit/csikit/sub\n\ngo 1.25.0\n\nrequire github.com/csikit/csikit v0.1.0\n",
		"sub/b.go":           "package sub\n\nimport _ \"github.com/csikit/csikit\"\n",
		"tools/go.mod":       "// csikit: unreleased\nmodule github.com/csikit/csikit/tools\n\ngo 1.25.0\n\nrequire github.com/csikit/csikit v0.1.0\n",
		"x/testdata/go.mod":  "module github.com/csikit/csikit/x/testdata\n\ngo 1.25.0\n\nrequire github.com/csikit/csikit v0.0.1\n",
		"go.work":            "// the workspace\ngo 1.25.0\n\nuse (\n\t.\n\t./sub\n\t./tools\n)\n\nreplace github.com/csikit/csikit v0.1.0 => ./\n",
		"CHANGELOG.md":       "# Changelog\n\n## [Unreleased]\n\n- **New thing.**\n\n## [0.1.0] - 2026-01-01\n\n- First.\n",
		"scripts/release.sh": string(script),
	}
	for name, body := range files {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.git("init", "-q", "-b", "main")
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "start")
	return r
}

func (r *releaseRepo) env() []string {
	return append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GOFLAGS=", "GOWORK=")
}

func (r *releaseRepo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = r.dir, r.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// release runs scripts/release.sh with args and returns its output and
// whether it succeeded.
func (r *releaseRepo) release(args ...string) (string, bool) {
	r.t.Helper()
	cmd := exec.Command("bash", append([]string{"scripts/release.sh"}, args...)...)
	cmd.Dir, cmd.Env = r.dir, r.env()
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func (r *releaseRepo) read(name string) string {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, name))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

func (r *releaseRepo) refuses(want string, args ...string) {
	r.t.Helper()
	out, ok := r.release(args...)
	if ok || !strings.Contains(out, want) {
		r.t.Errorf("release.sh %s: ok=%v, output %q; want a refusal containing %q", strings.Join(args, " "), ok, out, want)
	}
}

// TestReleaseScript prepares and tags a release of a throwaway repository,
// and checks each refusal: a dirty tree, a malformed or major-2 version, a
// tag before prepare (no CHANGELOG section), nested requires that do not
// match the version, a nested go.sum without the required go.mod hash, and
// a tag that exists.
func TestReleaseScript(t *testing.T) {
	r := newReleaseRepo(t)

	r.refuses("want vMAJOR.MINOR.PATCH", "prepare", "0.2.0")
	r.refuses("want vMAJOR.MINOR.PATCH", "prepare", "v2.0.0")
	r.refuses("run prepare first", "tag", "v0.2.0")

	// A CHANGELOG section for the version, but sub still requires v0.1.0.
	cl := strings.Replace(r.read("CHANGELOG.md"), "## [Unreleased]\n", "## [Unreleased]\n\n## [0.2.0] - 2026-02-02\n", 1)
	if err := os.WriteFile(filepath.Join(r.dir, "CHANGELOG.md"), []byte(cl), 0o644); err != nil {
		t.Fatal(err)
	}
	r.refuses("the tree is dirty", "tag", "v0.2.0")
	r.git("commit", "-q", "-a", "-m", "changelog by hand")
	r.refuses("sub/go.mod requires github.com/csikit/csikit v0.1.0", "tag", "v0.2.0")
	r.refuses("already has a section for 0.2.0", "prepare", "v0.2.0")
	r.git("revert", "--no-edit", "HEAD")

	if err := os.WriteFile(filepath.Join(r.dir, "a.go"), []byte("package csikit\n\nconst X = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.refuses("the tree is dirty", "prepare", "v0.2.0")
	r.git("checkout", "a.go")

	if out, ok := r.release("prepare", "v0.2.0"); !ok {
		t.Fatalf("prepare v0.2.0: %s", out)
	}
	if got := r.git("log", "-1", "--format=%s"); got != "release: v0.2.0" {
		t.Errorf("release commit subject %q, want %q", got, "release: v0.2.0")
	}
	if s := r.git("status", "--porcelain"); s != "" {
		t.Errorf("prepare left the tree dirty:\n%s", s)
	}
	if m := r.read("sub/go.mod"); !strings.Contains(m, "github.com/csikit/csikit v0.2.0") {
		t.Errorf("sub/go.mod after prepare:\n%s", m)
	}
	if m := r.read("tools/go.mod"); !strings.Contains(m, "github.com/csikit/csikit v0.1.0") {
		t.Errorf("prepare changed the unreleased tools module:\n%s", m)
	}
	if w := r.read("go.work"); !strings.Contains(w, "replace github.com/csikit/csikit v0.2.0 => ./") ||
		strings.Contains(w, "v0.1.0") || !strings.Contains(w, "// the workspace") {
		t.Errorf("go.work after prepare:\n%s", w)
	}
	cl = r.read("CHANGELOG.md")
	un, rel, old := strings.Index(cl, "## [Unreleased]"), strings.Index(cl, "## [0.2.0] - "), strings.Index(cl, "## [0.1.0]")
	entry := strings.Index(cl, "- **New thing.**")
	if un < 0 || !(un < rel && rel < entry && entry < old) {
		t.Errorf("CHANGELOG.md after prepare: want Unreleased (empty), then 0.2.0 with the entry, then 0.1.0:\n%s", cl)
	}

	// sub/go.sum holds the root's go.mod hash at v0.2.0, as Go computes it
	// (h1: SHA-256 of "<sha256 hex>  go.mod\n"), for a module cache where
	// go.sum is read-only.
	sum := sha256.Sum256([]byte(r.read("go.mod")))
	h1 := sha256.Sum256([]byte(fmt.Sprintf("%x  go.mod\n", sum)))
	line := "github.com/csikit/csikit v0.2.0/go.mod h1:" + base64.StdEncoding.EncodeToString(h1[:])
	if s := r.read("sub/go.sum"); !strings.Contains(s, line+"\n") {
		t.Errorf("sub/go.sum after prepare:\n%s\nwant the line %s", s, line)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "tools/go.sum")); err == nil {
		t.Errorf("prepare wrote tools/go.sum (an unreleased module)")
	}
	if err := os.WriteFile(filepath.Join(r.dir, "sub/go.sum"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.git("commit", "-q", "-a", "-m", "lose the sum")
	r.refuses("sub/go.sum lacks (or has a stale) github.com/csikit/csikit v0.2.0/go.mod hash", "tag", "v0.2.0")
	if out, ok := r.release("sums", "v0.2.0"); !ok || !strings.Contains(r.read("sub/go.sum"), line+"\n") {
		t.Fatalf("sums v0.2.0: %s\nsub/go.sum:\n%s", out, r.read("sub/go.sum"))
	}
	r.git("commit", "-q", "-a", "-m", "sums")

	if out, ok := r.release("tag", "v0.2.0"); !ok {
		t.Fatalf("tag v0.2.0: %s", out)
	}
	tags := strings.Fields(r.git("tag", "--points-at", "HEAD"))
	want := []string{"sub/v0.2.0", "v0.2.0"}
	if strings.Join(tags, " ") != strings.Join(want, " ") {
		t.Errorf("tags at the release commit: %v, want %v (not tools/, not testdata)", tags, want)
	}
	r.refuses("tag v0.2.0 exists", "tag", "v0.2.0")
}

package main

import (
	"archive/zip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// TestProxyFromTags: every released module at the version, from its tag
// (not the work tree), as the go command reads a proxy: list, .info, .mod
// and a zip that passes the go command's own checks and holds no nested
// module's files.
func TestProxyFromTags(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(repo, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q", "-b", "main")
	write("go.mod", "module example.com/Root\n\ngo 1.25.0\n")
	write("r.go", "package root\n")
	write("sub/go.mod", "module example.com/Root/sub\n\ngo 1.25.0\n\nrequire example.com/Root v0.3.0\n")
	write("sub/s.go", "package sub\n")
	git("add", "-A")
	git("commit", "-q", "-m", "release: v0.3.0")
	git("tag", "v0.3.0")
	git("tag", "sub/v0.3.0")
	write("r.go", "package root\n\n// After is not in the release.\nconst After = 1\n")

	out := t.TempDir()
	if err := run(repo, "v0.3.0", out); err != nil {
		t.Fatal(err)
	}
	for _, m := range []module.Version{{Path: "example.com/Root", Version: "v0.3.0"}, {Path: "example.com/Root/sub", Version: "v0.3.0"}} {
		esc, _ := module.EscapePath(m.Path) // "example.com/!root": upper case escaped
		dir := filepath.Join(out, filepath.FromSlash(esc), "@v")
		if b, err := os.ReadFile(filepath.Join(dir, "list")); err != nil || string(b) != "v0.3.0\n" {
			t.Errorf("%s list = %q, %v", m.Path, b, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "v0.3.0.info")); err != nil || !strings.Contains(string(b), `"Version":"v0.3.0"`) {
			t.Errorf("%s .info = %s, %v", m.Path, b, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "v0.3.0.mod")); err != nil || !strings.Contains(string(b), "module "+m.Path+"\n") {
			t.Errorf("%s .mod = %s, %v", m.Path, b, err)
		}
		cf, err := modzip.CheckZip(m, filepath.Join(dir, "v0.3.0.zip"))
		if err != nil {
			t.Fatalf("%s zip: %v", m.Path, err)
		}
		for _, f := range cf.Valid {
			if strings.HasPrefix(f, "sub/") {
				t.Errorf("%s zip holds the nested module's %s", m.Path, f)
			}
		}
	}
	// The zip is the tag's tree: the uncommitted After is not in it.
	zr, err := zip.OpenReader(filepath.Join(out, "example.com", "!root", "@v", "v0.3.0.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	f, err := zr.Open("example.com/Root@v0.3.0/r.go")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil || string(b) != "package root\n" {
		t.Errorf("r.go in the zip = %q, %v; want the tagged content", b, err)
	}
	if err := run(repo, "v0.3.0", out); err != nil {
		t.Fatalf("a second run over the same directory: %v", err)
	}
	if err := run(repo, "v0.4.0", t.TempDir()); err == nil || !strings.Contains(err.Error(), "no tag v0.4.0") {
		t.Errorf("a version with no tag: %v, want the missing tag named", err)
	}

	// -worktree: the tree as it is, under a version with no tag.
	fromTree = true
	defer func() { fromTree = false }()
	wt := t.TempDir()
	if err := run(repo, "v0.5.0", wt); err != nil {
		t.Fatal(err)
	}
	m := module.Version{Path: "example.com/Root", Version: "v0.5.0"}
	zipPath := filepath.Join(wt, "example.com", "!root", "@v", "v0.5.0.zip")
	if _, err := modzip.CheckZip(m, zipPath); err != nil {
		t.Fatal(err)
	}
	zt, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	defer zt.Close()
	ft, err := zt.Open("example.com/Root@v0.5.0/r.go")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(ft); err != nil || !strings.Contains(string(b), "const After") {
		t.Errorf("-worktree r.go = %q, %v; want the work tree's", b, err)
	}
}

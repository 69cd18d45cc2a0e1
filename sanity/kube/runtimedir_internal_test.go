package kube

import (
	"archive/zip"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRuntimeModuleDir: in a checkout the runtime module is <kube>/runtime;
// in a module cache (a directory named module@VERSION, with no runtime/
// inside, as a module zip never holds a nested module) it is the runtime
// module at the same version, downloaded, here from a file:// proxy made
// by hand; anything else is refused naming the option that avoids it.
func TestRuntimeModuleDir(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("needs the go command: %v", err)
	}
	ctx := context.Background()

	checkout := t.TempDir()
	if err := os.MkdirAll(filepath.Join(checkout, "runtime"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(checkout, "runtime", "go.mod"), []byte("module "+runtimeModule+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := runtimeModuleDir(ctx, checkout); err != nil || got != filepath.Join(checkout, "runtime") {
		t.Errorf("checkout: %q, %v; want its runtime/", got, err)
	}

	if _, err := runtimeModuleDir(ctx, t.TempDir()); err == nil || !strings.Contains(err.Error(), "RuntimeBinDir") {
		t.Errorf("neither a checkout nor a module cache: %v, want an error naming RuntimeBinDir", err)
	}

	const version = "v0.9.9"
	proxy := filepath.Join(t.TempDir(), "github.com", "csikit", "csikit", "sanity", "kube", "runtime", "@v")
	if err := os.MkdirAll(proxy, 0o755); err != nil {
		t.Fatal(err)
	}
	goMod := "module " + runtimeModule + "\n\ngo 1.25.0\n"
	zf, err := os.Create(filepath.Join(proxy, version+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(zf)
	w, err := zw.Create(runtimeModule + "@" + version + "/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(goMod)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"list":            version + "\n",
		version + ".mod":  goMod,
		version + ".info": `{"Version":"` + version + `","Time":"2026-01-01T00:00:00Z"}`,
	} {
		if err := os.WriteFile(filepath.Join(proxy, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	modcache := t.TempDir()
	t.Cleanup(func() { // the module cache is read-only
		_ = filepath.WalkDir(modcache, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
	})
	root := strings.TrimSuffix(proxy, filepath.FromSlash("/github.com/csikit/csikit/sanity/kube/runtime/@v"))
	t.Setenv("GOPROXY", "file://"+root)
	t.Setenv("GOMODCACHE", modcache)
	t.Setenv("GONOSUMDB", "github.com/csikit")
	t.Setenv("GOFLAGS", "")
	kubeDir := filepath.Join(t.TempDir(), "kube@"+version)
	if err := os.MkdirAll(kubeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := runtimeModuleDir(ctx, kubeDir)
	if err != nil {
		t.Fatalf("module cache: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(got, "go.mod")); err != nil || string(b) != goMod {
		t.Errorf("module cache: %s/go.mod = %q, %v; want the runtime module's", got, b, err)
	}
	if !strings.HasPrefix(got, modcache) {
		t.Errorf("module cache: %s is not in GOMODCACHE %s", got, modcache)
	}
}

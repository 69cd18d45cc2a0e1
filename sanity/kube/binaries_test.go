package kube_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/sanity/kube"
)

// A module whose tool block names tiny programs after the real binaries
// stands in for the Kubernetes build, which takes minutes.
func TestEnsureBinariesBuildsToolBlockOnce(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		testenv.Skipf(t, "needs the go command: %v", err)
	}
	mod := t.TempDir()
	names := []string{kube.BinEtcd, kube.BinAPIServer, kube.BinControllerManager, kube.BinProvisioner,
		kube.BinAttacher, kube.BinResizer, kube.BinSnapshotter, kube.BinSnapshotController,
		kube.BinKubelet, kube.BinScheduler}
	gomod := "module example.test/tools\n\ngo 1.26.0\n\ntool (\n"
	for _, n := range names {
		if err := os.MkdirAll(filepath.Join(mod, n), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mod, n, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gomod += "\texample.test/tools/" + n + "\n"
	}
	gomod += ")\n"
	for f, b := range map[string]string{"go.mod": gomod, "go.sum": ""} {
		if err := os.WriteFile(filepath.Join(mod, f), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cache := t.TempDir()
	stale := filepath.Join(cache, "0123456789abcdef")
	unrelated := filepath.Join(cache, "keep-me")
	for _, d := range []string{stale, unrelated} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if m := kube.MissingBinaries(stale); len(m) != len(names) {
		t.Errorf("MissingBinaries of an empty dir: got %v, want all %d", m, len(names))
	}

	want, err := kube.BinariesDir(kube.BuildOptions{ModuleDir: mod, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if m := kube.MissingBinaries(want); len(m) != len(names) {
		t.Errorf("BinariesDir before a build: got %s missing %v, want all %d missing (nothing built)", want, m, len(names))
	}
	dir, err := kube.EnsureBinaries(context.Background(), kube.BuildOptions{ModuleDir: mod, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if dir != want {
		t.Errorf("EnsureBinaries built into %s, BinariesDir said %s", dir, want)
	}
	if m := kube.MissingBinaries(dir); len(m) != 0 {
		t.Fatalf("after EnsureBinaries: got missing %v, want none", m)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale binary dir: got stat error %v, want it removed", err)
	}
	if _, err := os.Stat(unrelated); err != nil {
		t.Errorf("unrelated dir in the cache: got %v, want it kept", err)
	}
	fi, _ := os.Stat(filepath.Join(dir, kube.BinAPIServer))
	again, err := kube.EnsureBinaries(context.Background(), kube.BuildOptions{ModuleDir: mod, CacheDir: cache})
	if err != nil || again != dir {
		t.Fatalf("second EnsureBinaries: got %q, %v; want %q", again, err, dir)
	}
	fi2, _ := os.Stat(filepath.Join(dir, kube.BinAPIServer))
	if !fi2.ModTime().Equal(fi.ModTime()) {
		t.Error("second EnsureBinaries rebuilt: got a new modification time, want the cached binary")
	}

	// A changed go.mod is a new cache key.
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(strings.Replace(gomod, "go 1.26.0", "go 1.26.0\n// changed", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if next, err := kube.BinariesDir(kube.BuildOptions{ModuleDir: mod, CacheDir: cache}); err != nil || next == dir {
		t.Errorf("BinariesDir after a go.mod change: got %q, %v; want a new directory", next, err)
	}
	third, err := kube.EnsureBinaries(context.Background(), kube.BuildOptions{ModuleDir: mod, CacheDir: cache})
	if err != nil || third == dir {
		t.Fatalf("after a go.mod change: got %q, %v; want a new directory", third, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("previous binary dir: got %v, want removed after the new build", err)
	}
}

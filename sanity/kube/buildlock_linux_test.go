package kube

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLockBuildsExcludes: while one holder has the build lock, another
// waits (here until its context ends); once released, the lock is free.
func TestLockBuildsExcludes(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockBuilds(t.Context(), dir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	if _, err := lockBuilds(ctx, dir, t.Logf); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second holder while the first holds it: got %v, want a wait ended by its context", err)
	}
	unlock()
	unlock2, err := lockBuilds(t.Context(), dir, t.Logf)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	unlock2()
}

// TestEnsureBinariesWaitsForAnotherBuild: EnsureBinaries and
// EnsureE2EBinaries, finding binaries missing while another process
// builds them (holds the lock), wait and then use what that build left
// instead of building again (the go command is out of PATH: a build of
// their own would fail).
func TestEnsureBinariesWaitsForAnotherBuild(t *testing.T) {
	mod := t.TempDir()
	for f, body := range map[string]string{
		"go.mod":                     "module example.com/m\n",
		"go.sum":                     "",
		"internal/e2estorage/doc.go": "package e2estorage\n",
	} {
		p := filepath.Join(mod, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := BuildOptions{ModuleDir: mod, CacheDir: t.TempDir(), Log: t.Logf}
	dir, err := toolsDir(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())

	unlock, err := lockBuilds(t.Context(), o.CacheDir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		dir string
		err error
	}
	done := make(chan result, 2)
	go func() { d, err := EnsureBinaries(t.Context(), o); done <- result{d, err} }()
	go func() { d, err := EnsureE2EBinaries(t.Context(), o); done <- result{d, err} }()
	time.Sleep(time.Second)
	select {
	case r := <-done:
		t.Fatalf("returned while another build held the lock: %q, %v", r.dir, r.err)
	default:
	}
	// The other build's result.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range append(binaryNames(), BinE2ETest, BinAgnhost, BinKubectl, BinGinkgo) {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h, err := e2eSuiteHash(mod)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, BinE2ETest+".src"), []byte(h), 0o644); err != nil {
		t.Fatal(err)
	}
	unlock()
	for range 2 {
		if r := <-done; r.err != nil || r.dir != dir {
			t.Fatalf("after the other build: got %q, %v; want %q and no build of its own", r.dir, r.err, dir)
		}
	}
}

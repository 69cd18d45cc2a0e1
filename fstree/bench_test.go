//go:build linux

package fstree_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/csikit/csikit/fstree"
)

// benchTree makes a tree of 10,000 files of 1 KiB in 100 directories.
func benchTree(b *testing.B) string {
	b.Helper()
	root := filepath.Join(b.TempDir(), "tree")
	data := make([]byte, 1024)
	for i := range 100 {
		dir := filepath.Join(root, fmt.Sprintf("d%03d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for j := range 100 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", j)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return root
}

// naiveCopy is the obvious copy: a path walk with io.Copy, following
// symlinks when it opens files and writing every byte (holes included).
func naiveCopy(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

func BenchmarkCopy10k(b *testing.B) {
	src := benchTree(b)
	dst := filepath.Join(filepath.Dir(src), "copy")
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		copy func() error
	}{
		{"fstree", func() error { _, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{}); return err }},
		{"naive", func() error { return naiveCopy(src, dst) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.copy(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := os.RemoveAll(dst); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

func BenchmarkRemove10k(b *testing.B) {
	tmpl := benchTree(b)
	victim := filepath.Join(filepath.Dir(tmpl), "victim")
	ctx := context.Background()
	for _, bc := range []struct {
		name   string
		remove func() error
	}{
		{"fstree", func() error { return fstree.Remove(ctx, victim, fstree.RemoveOptions{}) }},
		{"os.RemoveAll", func() error { return os.RemoveAll(victim) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				if _, err := fstree.Copy(ctx, tmpl, victim, fstree.CopyOptions{}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := bc.remove(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChain2k copies and then removes a chain of 2,000 nested
// directories (with a file at the bottom): the walks' cost per level when
// the tree is deeper than the descriptors they keep open.
func BenchmarkChain2k(b *testing.B) {
	src := filepath.Join(b.TempDir(), "chain")
	p := src
	for range 2000 {
		p = filepath.Join(p, "d")
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "f"), []byte("bottom"), 0o644); err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(filepath.Dir(src), "copy")
	ctx := context.Background()
	for b.Loop() {
		if _, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{}); err != nil {
			b.Fatal(err)
		}
		if err := fstree.Remove(ctx, dst, fstree.RemoveOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

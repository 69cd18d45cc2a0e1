package kube_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/csikit/csikit/sanity/kube"
)

// TestExecutableFiles: a dynamically linked host program, with the files
// ExecutableFiles returns and nothing else, runs in a chroot (the
// interpreter and every library are there); a static one is one file.
func TestExecutableFiles(t *testing.T) {
	prog, err := exec.LookPath("ls")
	if err != nil {
		prereqSkip(t, "needs ls: "+err.Error())
	}
	if f, err := elf.Open(prog); err != nil || f.Section(".interp") == nil {
		prereqSkip(t, prog+" is not a dynamically linked ELF program")
	}
	files, err := kube.ExecutableFiles(prog, "/prog")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	if len(files) < 3 || files[0].Path != "/prog" || files[0].Source != prog {
		t.Fatalf("files %v: want the program, its interpreter and at least libc", paths)
	}
	if static := "/bin/busybox"; fileExists(static) {
		if f, err := elf.Open(static); err == nil && f.Section(".interp") == nil {
			sf, err := kube.ExecutableFiles(static, "/bin/busybox")
			if err != nil || len(sf) != 1 {
				t.Errorf("static %s: %v, %v: want one file", static, sf, err)
			}
		}
	}
	if os.Geteuid() != 0 {
		prereqSkip(t, "running it in a chroot needs root (the file list was checked)")
	}
	root := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(f.Source)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, f.Path)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/prog", "/")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a chroot with %v: %v: %s", prog, paths, err, out)
	}
	if !strings.Contains(string(out), "prog") {
		t.Errorf("ls / in the chroot printed %q, want the chroot's entries", out)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

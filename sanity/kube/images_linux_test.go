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
	out, err := inChroot(t, files, "/prog", "/")
	if err != nil {
		t.Fatalf("%s in a chroot with %v: %v: %s", prog, paths, err, out)
	}
	if !strings.Contains(string(out), "prog") {
		t.Errorf("ls / in the chroot printed %q, want the chroot's entries", out)
	}
}

// inChroot copies files into a new directory, each at its path, and runs
// args there in a chroot; it skips without root.
func inChroot(t *testing.T, files []kube.ImageFile, args ...string) ([]byte, error) {
	t.Helper()
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
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	return cmd.CombinedOutput()
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestExecutableFilesRunpath: a library found through the program's (or a
// library's) RUNPATH, outside the multiarch directories — as Ceph's
// librados finds libceph-common.so.2 in /usr/lib/x86_64-linux-gnu/ceph — is
// among the files, at its path, and the program runs in a chroot of them.
func TestExecutableFilesRunpath(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		prereqSkip(t, "needs gcc to link a program with a RUNPATH: "+err.Error())
	}
	dir := t.TempDir()
	libDir := filepath.Join(dir, "private lib")
	if err := os.Mkdir(libDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{
		"lib.c":  "int csikit_answer(void) { return 42; }\n",
		"main.c": "#include <stdio.h>\nint csikit_answer(void);\nint main(void) { printf(\"answer %d\\n\", csikit_answer()); return 0; }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lib := filepath.Join(libDir, "libcsikitanswer.so")
	prog := filepath.Join(dir, "prog")
	for _, args := range [][]string{
		{"-shared", "-fPIC", "-o", lib, filepath.Join(dir, "lib.c")},
		{"-o", prog, filepath.Join(dir, "main.c"), "-L" + libDir, "-lcsikitanswer", "-Wl,--enable-new-dtags,-rpath," + libDir},
	} {
		if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v: %s", args, err, out)
		}
	}
	f, err := elf.Open(prog)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := f.DynString(elf.DT_RUNPATH)
	f.Close()
	if err != nil || len(rp) != 1 || rp[0] != libDir {
		t.Fatalf("the linked program's RUNPATH: %v, %v; want [%s]", rp, err, libDir)
	}
	files, err := kube.ExecutableFiles(prog, "/prog")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range files {
		found = found || f.Path == lib
	}
	if !found {
		t.Fatalf("files %+v: want %s (the RUNPATH's library) among them", files, lib)
	}
	out, err := inChroot(t, files, "/prog")
	if err != nil || string(out) != "answer 42\n" {
		t.Fatalf("the program in a chroot of its files: %v: %q, want \"answer 42\"", err, out)
	}
}

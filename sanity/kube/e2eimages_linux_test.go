package kube_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/csikit/csikit/sanity/kube"
)

// TestE2EImagesGlibcDD: the glibc-dns-testing image runs the dd commands
// the multivolume suite's block cases send it (CheckWriteToPath's
// oflag=nocache, which upstream's glibc image takes and busybox's dd
// refuses: "dd: invalid argument 'nocache' to 'oflag'"), from the files
// of the image's layer alone, in a chroot.
func TestE2EImagesGlibcDD(t *testing.T) {
	if os.Geteuid() != 0 {
		prereqSkip(t, "running the image's dd in a chroot needs root")
	}
	if !fileExists("/bin/busybox") {
		prereqSkip(t, "needs the static busybox (busybox-static)")
	}
	dir, binDir := t.TempDir(), t.TempDir()
	// E2EImages puts agnhost in its image; any static program will do here.
	b, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(binDir, kube.BinAgnhost), b, 0o755); err != nil {
		t.Fatal(err)
	}
	tars, err := kube.E2EImages(context.Background(), dir, "/bin/busybox", binDir)
	if err != nil {
		t.Fatal(err)
	}
	var image string
	for _, f := range tars {
		if strings.Contains(filepath.Base(f), "glibc-dns-testing") {
			image = f
		}
	}
	if image == "" {
		t.Fatalf("no glibc-dns-testing image among %v", tars)
	}
	root := t.TempDir()
	unpackLayer(t, image, root)
	cmd := exec.Command("/bin/sh", "-c", "echo data | dd of=/tmp/f oflag=nocache bs=512 count=1 && cat /tmp/f")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "data") {
		t.Fatalf("dd oflag=nocache in glibc-dns-testing: %v: %s", err, out)
	}
}

// unpackLayer writes the files of the one layer of the docker-archive
// image at file into root.
func unpackLayer(t *testing.T, file, root string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var layer []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(h.Name, "/layer.tar") {
			if layer, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if layer == nil {
		t.Fatalf("%s: no layer.tar", file)
	}
	lr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeSymlink:
			if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
				err = os.Symlink(h.Linkname, dst)
			}
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(lr); err == nil {
				if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
					err = os.WriteFile(dst, data, os.FileMode(h.Mode)&0o777)
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

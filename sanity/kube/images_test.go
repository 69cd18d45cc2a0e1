package kube_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/csikit/csikit/sanity/kube"
)

// TestWriteImage reads back a tarball WriteImage wrote: the manifest names
// the config and the layer, the config's diff ID is the layer's digest,
// and the layer holds the files, their parents and the symlinks.
func TestWriteImage(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "prog")
	if err := os.WriteFile(src, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := kube.BusyboxFiles(src, []string{"sh", "cat", "sh", "../evil"})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	if err := kube.WriteImage(out, "csikit.local/test:1", kube.ImageConfig{Cmd: []string{"sh"}}, files); err != nil {
		t.Fatal(err)
	}
	outer := readTar(t, mustRead(t, out))
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(outer["manifest.json"].data, &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 || len(manifest[0].Layers) != 1 || manifest[0].RepoTags[0] != "csikit.local/test:1" {
		t.Fatalf("manifest %+v", manifest)
	}
	var cfg struct {
		OS     string `json:"os"`
		Config struct{ Cmd []string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(outer[manifest[0].Config].data, &cfg); err != nil {
		t.Fatal(err)
	}
	layer := outer[manifest[0].Layers[0]].data
	sum := sha256.Sum256(layer)
	if cfg.OS != "linux" || len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("config %+v does not match the layer digest %x", cfg, sum)
	}
	l := readTar(t, layer)
	if e, ok := l["bin/busybox"]; !ok || string(e.data) != "#!binary" || e.hdr.Mode != 0o755 {
		t.Errorf("bin/busybox: %+v", e)
	}
	for _, a := range []string{"bin/sh", "bin/cat", "bin/evil"} {
		if e, ok := l[a]; !ok || e.hdr.Typeflag != tar.TypeSymlink || e.hdr.Linkname != "busybox" {
			t.Errorf("%s: want a symlink to busybox, got %+v", a, e.hdr)
		}
	}
	for _, d := range []string{"bin/", "tmp/"} {
		if e, ok := l[d]; !ok || e.hdr.Typeflag != tar.TypeDir {
			t.Errorf("%s: want a directory", d)
		}
	}
	if len(l) != 6 {
		t.Errorf("layer has %d entries, want 6 (no duplicate, nothing outside /bin)", len(l))
	}
	if err := kube.WriteImage(out, "x:1", kube.ImageConfig{}, []kube.ImageFile{{Path: "rel"}}); err == nil {
		t.Error("a relative path in an image: no error")
	}
}

type tarEntry struct {
	hdr  *tar.Header
	data []byte
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readTar(t *testing.T, b []byte) map[string]tarEntry {
	t.Helper()
	out := map[string]tarEntry{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		d, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = tarEntry{hdr: h, data: d}
	}
}

package kube

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// ImageFile is one entry of an image's single layer.
type ImageFile struct {
	// Path is the absolute path inside the image, e.g. "/bin/busybox".
	Path string
	// Mode is the permission bits (default 0o755 for files and directories).
	Mode fs.FileMode
	// Data is the content of a regular file; Source, when set, is a host
	// file whose content is used instead.
	Data   []byte
	Source string
	// Link makes the entry a symlink to Link.
	Link string
	// Dir makes the entry a directory.
	Dir bool
}

// ImageConfig is the runtime configuration of an image.
type ImageConfig struct {
	// Entrypoint and Cmd are the image's default command.
	Entrypoint, Cmd []string
	// Env is the default environment ("KEY=value").
	Env []string
}

// WriteImage writes a one-layer image named ref (e.g.
// "csikit.local/busybox:1") as a tarball in the docker-archive layout that
// `ctr images import` reads: no registry, no daemon, no C compiler. Parent
// directories of every file are added to the layer.
func WriteImage(file, ref string, cfg ImageConfig, files []ImageFile) error {
	layer, err := layerTar(files)
	if err != nil {
		return err
	}
	layerSum := sha256.Sum256(layer)
	diffID := "sha256:" + hex.EncodeToString(layerSum[:])
	if cfg.Env == nil {
		cfg.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      time.Unix(0, 0).UTC().Format(time.RFC3339),
		"config":       map[string]any{"Entrypoint": cfg.Entrypoint, "Cmd": cfg.Cmd, "Env": cfg.Env},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history":      []map[string]any{{"created_by": "csikit sanity/kube WriteImage"}},
	})
	if err != nil {
		return fmt.Errorf("kube: image config: %w", err)
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(layerSum[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": []string{ref}, "Layers": []string{layerName},
	}})
	if err != nil {
		return fmt.Errorf("kube: image manifest: %w", err)
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, e := range []struct {
		name string
		data []byte
	}{{path.Dir(layerName), nil}, {layerName, layer}, {configName, config}, {"manifest.json", manifest}} {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if e.data == nil {
			h = &tar.Header{Name: e.name + "/", Mode: 0o755, Typeflag: tar.TypeDir, Format: tar.FormatPAX}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("kube: image tarball: %w", err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("kube: image tarball: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("kube: image tarball: %w", err)
	}
	if err := os.WriteFile(file, out.Bytes(), 0o600); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	return nil
}

// layerTar returns the uncompressed tar of files, sorted, with every parent
// directory, owned by root.
func layerTar(files []ImageFile) ([]byte, error) {
	entries := map[string]ImageFile{}
	for _, f := range files {
		p := path.Clean(f.Path)
		if !path.IsAbs(f.Path) || p == "/" {
			return nil, fmt.Errorf("kube: image file %q: want an absolute path below /", f.Path)
		}
		if _, dup := entries[p]; dup {
			return nil, fmt.Errorf("kube: image file %q given twice", p)
		}
		f.Path = p
		entries[p] = f
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := entries[d]; !ok {
				entries[d] = ImageFile{Path: d, Dir: true}
			}
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		f := entries[n]
		mode := int64(f.Mode.Perm())
		if f.Mode == 0 {
			mode = 0o755
		}
		h := &tar.Header{Name: strings.TrimPrefix(n, "/"), Mode: mode, Format: tar.FormatPAX}
		data := f.Data
		switch {
		case f.Dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case f.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
		default:
			if f.Source != "" {
				b, err := os.ReadFile(f.Source)
				if err != nil {
					return nil, fmt.Errorf("kube: image file %s: %w", n, err)
				}
				data = b
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("kube: image layer: %w", err)
		}
		if len(data) > 0 {
			if _, err := tw.Write(data); err != nil {
				return nil, fmt.Errorf("kube: image layer: %w", err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("kube: image layer: %w", err)
	}
	return buf.Bytes(), nil
}

// BusyboxFiles returns the files of a busybox image from a static busybox
// binary on the host (Debian's busybox-static: /bin/busybox): the binary
// and a symlink per applet in /bin, plus /tmp.
func BusyboxFiles(busybox string, applets []string) ([]ImageFile, error) {
	if len(applets) == 0 {
		return nil, errors.New("kube: busybox image: no applets")
	}
	files := []ImageFile{{Path: "/bin/busybox", Source: busybox}, {Path: "/tmp", Dir: true, Mode: 0o777}}
	seen := map[string]bool{"busybox": true}
	for _, a := range applets {
		a = path.Base(strings.TrimSpace(a))
		if a == "" || a == "." || a == "/" || seen[a] {
			continue
		}
		seen[a] = true
		files = append(files, ImageFile{Path: "/bin/" + a, Link: "busybox"})
	}
	return files, nil
}

// libDirs are where ExecutableFiles looks for the shared libraries a
// dynamically linked program needs (Debian's multiarch directories first).
var libDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

// ExecutableFiles returns the image files that run the host program src
// at dst inside an image: the program itself and, when it is dynamically
// linked (e.g. a Go binary built with cgo, as `go build` makes the
// sidecars of this module's tool block), its ELF interpreter and every
// shared library it needs, recursively, at the same paths as on the host
// (content copied, symlinks resolved), looked up in each object's
// RUNPATH (or RPATH) first, as the dynamic loader does: Ceph's librados
// finds libceph-common.so.2 in /usr/lib/<arch>/ceph that way. A static
// program is one file.
func ExecutableFiles(src, dst string) ([]ImageFile, error) {
	files := []ImageFile{{Path: dst, Source: src}}
	seen := map[string]bool{}
	var add func(file string) error
	add = func(file string) error {
		f, err := elf.Open(file)
		if err != nil {
			return fmt.Errorf("kube: image executable %s: %w", file, err)
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return fmt.Errorf("kube: image executable %s: interpreter: %w", file, err)
			}
			interp := strings.TrimRight(string(b), "\x00")
			if !seen[interp] {
				seen[interp] = true
				real, err := filepath.EvalSymlinks(interp)
				if err != nil {
					return fmt.Errorf("kube: image executable %s: interpreter %s: %w", file, interp, err)
				}
				files = append(files, ImageFile{Path: interp, Source: real})
			}
		}
		libs, err := f.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("kube: image executable %s: %w", file, err)
		}
		dirs := append(runpath(f, file), libDirs...)
		for _, lib := range libs {
			if seen[lib] {
				continue
			}
			seen[lib] = true
			found := ""
			for _, d := range dirs {
				if _, err := os.Stat(path.Join(d, lib)); err == nil {
					found = path.Join(d, lib)
					break
				}
			}
			if found == "" {
				return fmt.Errorf("kube: image executable %s: shared library %s not found in %v", file, lib, dirs)
			}
			real, err := filepath.EvalSymlinks(found)
			if err != nil {
				return fmt.Errorf("kube: image executable %s: %w", file, err)
			}
			files = append(files, ImageFile{Path: found, Source: real, Mode: 0o755})
			if err := add(real); err != nil {
				return err
			}
		}
		return nil
	}
	if err := add(src); err != nil {
		return nil, err
	}
	return files, nil
}

// runpath returns the directories of an ELF object's DT_RUNPATH (or, when
// it has none, DT_RPATH), with $ORIGIN the directory of file.
func runpath(f *elf.File, file string) []string {
	rp, err := f.DynString(elf.DT_RUNPATH)
	if err != nil || len(rp) == 0 {
		rp, _ = f.DynString(elf.DT_RPATH)
	}
	var dirs []string
	for _, s := range rp {
		for _, d := range strings.Split(s, ":") {
			d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", "$ORIGIN"), "$ORIGIN", filepath.Dir(file))
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	return dirs
}

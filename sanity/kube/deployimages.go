package kube

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The images a driver's deploy manifests run in the kubelet mode, built
// from the host (no registry, no container build): the driver's own, as
// its Dockerfile would make it, and the CSI sidecars of the tool block.

// DriverImage describes a driver's image for the kubelet mode, made of
// host files the way its Dockerfile installs them: WriteDriverImage
// writes it.
type DriverImage struct {
	// Ref is the image reference, e.g. "csikit.local/mydriver:test" (a
	// test substitutes it for the manifest's: kubelet pulls never).
	Ref string
	// Driver is the driver's binary, put at /<its base name>, the image's
	// entrypoint, with the shared libraries it loads (ExecutableFiles).
	Driver string
	// Busybox is a static busybox, put at /bin/busybox with a symlink per
	// applet (a shell, mount(8) for the driver): default /bin/busybox.
	Busybox string
	// Tools are host programs the driver runs (mkfs, fsck, blkid, …), each
	// at its own path with the shared libraries it loads; a shell script
	// ("#!/bin/sh", e.g. Debian's fsck.xfs) as it is, for busybox's sh.
	Tools []string
	// Files are more files (configuration files, symlinks).
	Files []ImageFile
}

// WriteDriverImage writes img to file as an image tarball for
// KubeletOptions.Images. A file the image would get twice at one path
// (a library two programs load) is put in once.
func WriteDriverImage(ctx context.Context, file string, img DriverImage) error {
	busybox := img.Busybox
	if busybox == "" {
		busybox = "/bin/busybox"
	}
	applets, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("kube: %s --list: %w", busybox, err)
	}
	files, err := BusyboxFiles(busybox, strings.Fields(string(applets)))
	if err != nil {
		return err
	}
	add := func(fs []ImageFile) {
		for _, f := range fs {
			if !slices.ContainsFunc(files, func(g ImageFile) bool { return g.Path == f.Path }) {
				files = append(files, f)
			}
		}
	}
	entry := "/" + filepath.Base(img.Driver)
	drv, err := ExecutableFiles(img.Driver, entry)
	if err != nil {
		return err
	}
	add(drv)
	for _, p := range img.Tools {
		tool, err := ExecutableFiles(p, p)
		if b, rerr := os.ReadFile(p); err != nil && rerr == nil && bytes.HasPrefix(b, []byte("#!/bin/sh")) {
			tool, err = []ImageFile{{Path: p, Source: p}}, nil
		}
		if err != nil {
			return fmt.Errorf("kube: the image %s: tool %s: %w", img.Ref, p, err)
		}
		add(tool)
	}
	add(img.Files)
	return WriteImage(file, img.Ref, ImageConfig{Entrypoint: []string{entry}}, files)
}

// sidecarBinaries are the sidecars SidecarImages makes images of.
var sidecarBinaries = []string{BinProvisioner, BinAttacher, BinResizer, BinSnapshotter}

// SidecarImages writes, as tarballs in dir, an image for each container
// of the workloads in manifest (a Deployment's, DaemonSet's or
// StatefulSet's pod template; a multi-document file) named after one of
// the sidecars of binDir (EnsureBinaries: csi-provisioner, csi-attacher,
// csi-resizer, csi-snapshotter), under the very image reference the
// manifest names, so that the manifest runs unchanged. It checks first
// that the reference's tag is the version the binary was built from (its
// module's, from its build information): a manifest and a tool block that
// disagree are an error naming both. It returns the tarballs, for
// KubeletOptions.Images, in the manifest's order.
func SidecarImages(dir, binDir string, manifest []byte) ([]string, error) {
	var tars []string
	for _, doc := range bytes.Split(manifest, []byte("\n---")) {
		var w struct {
			Kind string `json:"kind"`
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &w); err != nil {
			return nil, fmt.Errorf("kube: sidecar images: %w", err)
		}
		if w.Kind != "Deployment" && w.Kind != "DaemonSet" && w.Kind != "StatefulSet" {
			continue
		}
		for _, c := range w.Spec.Template.Spec.Containers {
			if !slices.Contains(sidecarBinaries, c.Name) {
				continue
			}
			bin := filepath.Join(binDir, c.Name)
			bi, err := buildinfo.ReadFile(bin)
			if err != nil {
				return nil, fmt.Errorf("kube: sidecar %s: %w", c.Name, err)
			}
			if !strings.HasSuffix(c.Image, ":"+bi.Main.Version) {
				return nil, fmt.Errorf("kube: the manifest runs %s (%s), but %s is %s %s: update one of them",
					c.Name, c.Image, bin, bi.Main.Path, bi.Main.Version)
			}
			files, err := ExecutableFiles(bin, "/"+c.Name)
			if err != nil {
				return nil, err
			}
			tar := filepath.Join(dir, c.Name+".tar")
			if err := WriteImage(tar, c.Image, ImageConfig{Entrypoint: []string{"/" + c.Name}}, files); err != nil {
				return nil, err
			}
			tars = append(tars, tar)
		}
	}
	return tars, nil
}

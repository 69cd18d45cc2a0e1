package kube_test

import (
	"archive/tar"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csikit/csikit/sanity/kube"
)

// imageLayer returns the entries of the one layer of the image tarball
// file, and its config's entrypoint.
func imageLayer(t *testing.T, file string) (map[string]tarEntry, []string) {
	t.Helper()
	outer := readTar(t, mustRead(t, file))
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(outer["manifest.json"].data, &manifest); err != nil || len(manifest) != 1 || len(manifest[0].Layers) != 1 {
		t.Fatalf("%s: manifest %+v %v", file, manifest, err)
	}
	var cfg struct{ Config struct{ Entrypoint []string } }
	if err := json.Unmarshal(outer[manifest[0].Config].data, &cfg); err != nil {
		t.Fatal(err)
	}
	return readTar(t, outer[manifest[0].Layers[0]].data), cfg.Config.Entrypoint
}

// TestWriteDriverImage: the driver at /<name> as the entrypoint with its
// libraries, busybox with its applets, a dynamically linked tool with its
// libraries, a shell-script tool as it is, extra files; each path once; a
// missing tool is an error naming it.
func TestWriteDriverImage(t *testing.T) {
	for _, p := range []string{"/bin/busybox", "/usr/sbin/blkid"} {
		if _, err := os.Stat(p); err != nil {
			prereqSkip(t, "needs "+p+" (busybox-static, util-linux)")
		}
	}
	dir := t.TempDir()
	ls, err := exec.LookPath("ls")
	if err != nil {
		prereqSkip(t, err)
	}
	drv := filepath.Join(dir, "mydriver")
	if err := os.WriteFile(drv, mustRead(t, ls), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "fsck.script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "img.tar")
	ctx := context.Background()
	err = kube.WriteDriverImage(ctx, file, kube.DriverImage{Ref: "csikit.local/mydriver:test", Driver: drv,
		Tools: []string{"/usr/sbin/blkid", script},
		Files: []kube.ImageFile{{Path: "/etc/mtab", Link: "/proc/self/mounts"}}})
	if err != nil {
		t.Fatal(err)
	}
	l, entry := imageLayer(t, file)
	if len(entry) != 1 || entry[0] != "/mydriver" {
		t.Errorf("entrypoint %q, want /mydriver", entry)
	}
	for _, p := range []string{"mydriver", "bin/busybox", "bin/sh", "usr/sbin/blkid", strings.TrimPrefix(script, "/"), "etc/mtab"} {
		if _, ok := l[p]; !ok {
			t.Errorf("the image lacks %s", p)
		}
	}
	if e := l[strings.TrimPrefix(script, "/")]; string(e.data) != "#!/bin/sh\nexit 0\n" {
		t.Errorf("the script tool: %q", e.data)
	}
	libs := 0
	for p := range l {
		if strings.Contains(p, ".so") {
			libs++
		}
	}
	if libs == 0 {
		t.Error("no shared library in the image: ls and blkid need them")
	}
	err = kube.WriteDriverImage(ctx, file, kube.DriverImage{Ref: "x:1", Driver: drv, Tools: []string{"/nonexistent/mkfs.none"}})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/mkfs.none") {
		t.Errorf("a missing tool: %v, want an error naming it", err)
	}
}

// TestSidecarImages: a sidecar container of a Deployment (in a
// multi-document manifest) gets an image under the manifest's reference
// when its tag is the version of the binary; the driver's own container
// and other kinds are left alone; a tag the binary is not is an error
// naming both.
func TestSidecarImages(t *testing.T) {
	binDir, err := kube.BinariesDir(kube.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := kube.MissingBinaries(binDir); len(m) > 0 {
		prereqSkip(t, "the tool block is not built (kube.EnsureBinaries; ci.sh does): "+strings.Join(m, " "))
	}
	bi, err := buildinfo.ReadFile(filepath.Join(binDir, kube.BinAttacher))
	if err != nil {
		t.Fatal(err)
	}
	manifest := func(tag string) []byte {
		return []byte(`# the controller
apiVersion: v1
kind: ServiceAccount
metadata: {name: ctrl}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ctrl}
spec:
  template:
    spec:
      containers:
        - name: mydriver
          image: vendor/mydriver:latest
        - name: csi-attacher
          image: registry.k8s.io/sig-storage/csi-attacher:` + tag + `
`)
	}
	dir := t.TempDir()
	tars, err := kube.SidecarImages(dir, binDir, manifest(bi.Main.Version))
	if err != nil {
		t.Fatal(err)
	}
	if len(tars) != 1 || filepath.Base(tars[0]) != "csi-attacher.tar" {
		t.Fatalf("images %v, want csi-attacher's only", tars)
	}
	outer := readTar(t, mustRead(t, tars[0]))
	if !strings.Contains(string(outer["manifest.json"].data), "registry.k8s.io/sig-storage/csi-attacher:"+bi.Main.Version) {
		t.Errorf("manifest.json %s: want the manifest's reference", outer["manifest.json"].data)
	}
	if l, entry := imageLayer(t, tars[0]); len(entry) != 1 || entry[0] != "/csi-attacher" || l["csi-attacher"].hdr.Typeflag != tar.TypeReg {
		t.Errorf("entrypoint %q, layer has csi-attacher: %v", entry, l["csi-attacher"].hdr)
	}
	// The shipped manifests run the sidecars the tool block builds.
	for _, f := range []string{hostpathDeploy("controller.yaml"), filepath.Join("..", "..", "examples", "rbd", "deploy", "controller.yaml")} {
		if tars, err := kube.SidecarImages(t.TempDir(), binDir, mustRead(t, f)); err != nil || len(tars) != 4 {
			t.Errorf("%s: %v, %v: want the images of its 4 sidecars", f, tars, err)
		}
	}
	_, err = kube.SidecarImages(dir, binDir, manifest("v0.0.1"))
	if err == nil || !strings.Contains(err.Error(), "csi-attacher:v0.0.1") || !strings.Contains(err.Error(), bi.Main.Version) {
		t.Errorf("a tag the binary is not: %v, want an error naming both versions", err)
	}
}

// TestHostIP: the address of the default route, an IPv4 address of this
// host that is not loopback.
func TestHostIP(t *testing.T) {
	ip, err := kube.HostIP()
	if err != nil {
		prereqSkip(t, err) // no default route
	}
	p := net.ParseIP(ip)
	if p == nil || p.To4() == nil || p.IsLoopback() {
		t.Fatalf("HostIP() = %q, want a non-loopback IPv4 address", ip)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(p) {
			return
		}
	}
	t.Errorf("HostIP() = %s: not an address of this host's interfaces %v", ip, addrs)
}

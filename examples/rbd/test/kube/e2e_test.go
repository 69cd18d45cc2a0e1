//go:build linux

package kube_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/sanity/kube"
)

// rbdImage is the image the e2e test builds for the driver (the
// manifests name csikit/rbd:latest, which kubelet would try to pull).
const rbdImage = "csikit.local/rbd:e2e"

// e2eWait bounds a deploy pod's progress on a loaded machine.
const e2eWait = 3 * time.Minute

// e2eEnvSkips are the suite's specs this environment cannot run, by their
// exact text, each with the reason: limits of one sandboxed machine, not
// of the driver.
var e2eEnvSkips = []struct{ spec, reason string }{
	{"volumeMode should not mount / map unused volumes in a pod",
		"it lists /var/lib/kubelet/pods/<uid>/volumes through nsenter into PID 1's mount namespace from a hostexec pod: " +
			"this kubelet's --root-dir is below the environment's directory, and the sandbox denies opening /proc/1/ns/mnt"},
	{"[Testpattern: Dynamic PV (default fs)(allowExpansion)] volume-expand should resize volume when PVC is edited while pod is using it",
		"growing a mounted ext4 (resize2fs, EXT4_IOC_RESIZE_FS) needs CAP_SYS_RESOURCE, which this sandbox denies even to " +
			"privileged containers (NodeExpandVolume: \"Permission denied to resize filesystem\"); the block pattern of the same " +
			"spec runs, and an ext4 grown while unstaged grows at NodeStageVolume (TestStageGrowsExpandedExt4)"},
	{"ephemeral should support expansion of pvcs created for ephemeral pvcs",
		"both generic ephemeral patterns (immediate and late binding) grow the volume while its pod runs: resize2fs on the mounted ext4 needs CAP_SYS_RESOURCE, which this sandbox denies " +
			"(NodeExpandVolume: \"Permission denied to resize filesystem\"), as for volume-expand's online case above"},
	{"capacity provides storage capacity information",
		"a sidecar limit, not the driver's: external-provisioner v6.4.0 publishes CSIStorageCapacity only for WaitForFirstConsumer " +
			"classes (deploy/storageclass.yaml binds Immediately) unless --capacity-for-immediate-binding, and with it deletes each " +
			"object of a driver without topology right after creating it (WorkItem.equals compares the empty segment's " +
			"MatchLabels map{} with the nil the API server returns), so the suite never sees one"},
}

// TestE2E runs Kubernetes' own storage e2e suite (e2e.test, focus
// External.Storage) against examples/rbd deployed with its deploy/
// manifests in sanity/kube's kubelet mode (the node plugin maps with
// rbd-fuse and a loop device: this kernel has no rbd module), on a pool
// and user of its own of the cluster of test/cluster.sh, which must be
// reachable from pods (cluster.sh start with CSIKIT_CEPH_ADDR=<the host's
// address>). The test-driver file is what `csikit testdriver` derives from
// the deployed node plugin's capabilities; the suite runs ext4 (the
// StorageClass's csi.storage.k8s.io/fstype) and block volumes. Opt-in
// (sanity/kube/e2e/run.sh rbd): CSIKIT_KUBE_E2E=rbd, CSIKIT_KUBE_E2E_FOCUS
// and CSIKIT_KUBE_E2E_SKIP narrow the run, CSIKIT_KUBE_E2E_PROCS runs specs
// in parallel, CSIKIT_KUBE_E2E_DIR keeps the JUnit file and the logs.
func TestE2E(t *testing.T) {
	if os.Getenv("CSIKIT_KUBE_E2E") != "rbd" {
		t.Skip("Kubernetes' storage e2e suite is opt-in: sanity/kube/e2e/run.sh rbd (CSIKIT_KUBE_E2E=rbd)")
	}
	start := time.Now()
	cephtest.RequireRoot(t)
	if err := kube.NodePrereqs(kube.KubeletOptions{}); err != nil {
		cephtest.Skipf(t, "the kubelet mode: %v", err)
	}
	c := cephtest.Require(t)
	if host, _, err := net.SplitHostPort(c.Monitors); err != nil || net.ParseIP(host).IsLoopback() {
		t.Fatalf("the cluster's monitor %s is on loopback: the Deployment's pods cannot reach it; "+
			"start it with CSIKIT_CEPH_ADDR=<the host's address> test/cluster.sh start DIR (run.sh rbd does)", c.Monitors)
	}
	ctx := context.Background()
	binDir, err := kube.EnsureBinaries(ctx, kube.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e2eBin, err := kube.EnsureE2EBinaries(ctx, kube.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool, secrets := cephtest.TenantPool(t, c)
	out := os.Getenv("CSIKIT_KUBE_E2E_DIR")
	if out == "" {
		out = t.TempDir()
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "csikit-rbd-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	images := rbdImages(t, dir, binDir)
	e2eImages, err := kube.E2EImages(ctx, dir, "/bin/busybox", e2eBin)
	if err != nil {
		t.Fatal(err)
	}
	images = append(images, e2eImages...)
	csikitBin := filepath.Join(dir, "csikit")
	if b, err := exec.Command("go", "build", "-o", csikitBin, "github.com/csikit/csikit/cmd/csikit").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/csikit: %v: %s", err, b)
	}
	t.Logf("binaries and images ready in %s", time.Since(start).Round(time.Second))

	// The node plugin's state directory, where its rbd-fuse mounts live:
	// node.yaml mounts it with Bidirectional propagation, which needs a
	// shared mount on the host (as kubelet makes its root directory).
	state := sharedDir(t, filepath.Join(dir, "state"))

	nodeIP, err := kube.HostIP()
	if err != nil {
		t.Fatal(err)
	}
	env := kube.Start(t, kube.Options{
		DriverName: driverName, NodeName: "node-1", BinDir: binDir,
		Sidecars: []string{}, // the Deployment's sidecars only
		// The suite runs kubectl exec: the API server must reach kubelet.
		Kubelet: &kube.KubeletOptions{Images: images, NodeIP: nodeIP, CheckLeftovers: true},
		// The suite deletes a namespace per spec and uses generic
		// ephemeral volumes (owned by their pods).
		ExtraArgs: map[string][]string{"kube-controller-manager": {
			"--controllers=namespace-controller,garbage-collector-controller,ephemeral-volume-controller"}},
	})
	root := env.KubeletDir()
	applyDeploy(t, env, pool, secrets)
	monitors := "10.0.0.1:3300,10.0.0.2:3300,10.0.0.3:3300"
	env.ApplyFile(t, filepath.Join("..", "..", "deploy", "node.yaml"),
		"csikit/rbd:latest", rbdImage,
		monitors, c.Monitors,
		"--mapper=krbd", "--mapper=rbd-fuse", // no rbd module in this kernel
		"--pool=rbd", "--pool="+pool, // where the node registers
		"/var/lib/kubelet", root,
		"{path: /var/lib/csikit-rbd, type: DirectoryOrCreate}", "{path: "+state+", type: DirectoryOrCreate}")
	env.ApplyFile(t, filepath.Join("..", "..", "deploy", "controller.yaml"),
		"csikit/rbd:latest", rbdImage,
		monitors, c.Monitors,
		"--pool=rbd", "--pool="+pool)
	t.Cleanup(func() {
		if t.Failed() {
			env.LogPods(t, secretNS, 40)
		}
	})
	kube.WaitFor(t, e2eWait, "the DaemonSet's pod Ready", func(ctx context.Context) (bool, string, error) {
		return env.PodsReady(ctx, secretNS, "app=csikit-rbd-node", 1, 1)
	})
	if d := env.WaitDriverRegistered(t, e2eWait, "node-1", driverName); d.NodeID != "node-1" {
		t.Fatalf("the DaemonSet's pod registered the driver on node-1 with node ID %q", d.NodeID)
	}
	kube.WaitFor(t, e2eWait, "the Deployment's pods Ready", func(ctx context.Context) (bool, string, error) {
		return env.PodsReady(ctx, secretNS, "app=csikit-rbd-controller", 2, 5)
	})
	t.Logf("driver deployed %s after the start", time.Since(start).Round(time.Second))

	// The classes the suite provisions and snapshots with: deploy/'s,
	// with the test's pool (as applyDeploy applied them).
	sc, err := os.ReadFile(filepath.Join("..", "..", "deploy", "storageclass.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(sc), "\n  pool: rbd\n"); n != 1 {
		t.Fatalf("deploy/storageclass.yaml: %d lines \"  pool: rbd\", want 1", n)
	}
	scFile := filepath.Join(out, "storageclass.yaml")
	if err := os.WriteFile(scFile, []byte(strings.Replace(string(sc), "\n  pool: rbd\n", "\n  pool: "+pool+"\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("storageclass.yaml: deploy/'s with pool %s", pool)
	vscFile, err := filepath.Abs(filepath.Join("..", "..", "deploy", "volumesnapshotclass.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// What CSI does not show, from the driver's README: block volumes, its
	// filesystems (the class's ext4), a mount option ext4 takes.
	args := []string{"testdriver", filepath.Join(root, "plugins", driverName, "csi.sock"),
		"--storage-class", scFile, "--snapshot-class", vscFile, "--block", "--mount-options", "noatime", "--multiple-pvs-same-id",
		"--access-modes", "SINGLE_NODE_WRITER,SINGLE_NODE_READER_ONLY", "--fs-types", ",ext4", "--fs-type", "ext4"}
	td, err := exec.Command(csikitBin, args...).Output()
	if err != nil {
		t.Fatalf("csikit %s: %v", strings.Join(args, " "), err)
	}
	tdFile := filepath.Join(out, "test-driver.yaml")
	if err := os.WriteFile(tdFile, td, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("test-driver.yaml (csikit %s):\n%s", strings.Join(args, " "), td)

	focus := "External.Storage"
	if f := os.Getenv("CSIKIT_KUBE_E2E_FOCUS"); f != "" {
		focus += ".*(" + f + ")"
	}
	var skip string
	for _, s := range e2eEnvSkips {
		skip = strings.TrimPrefix(skip+"|"+regexp.QuoteMeta(s.spec), "|")
		t.Logf("skipped by name: %q: %s", s.spec, s.reason)
	}
	if s := os.Getenv("CSIKIT_KUBE_E2E_SKIP"); s != "" {
		skip = strings.TrimPrefix(skip+"|"+s, "|")
	}
	procs := 1
	if p := os.Getenv("CSIKIT_KUBE_E2E_PROCS"); p != "" {
		if _, err := fmt.Sscan(p, &procs); err != nil {
			t.Fatalf("CSIKIT_KUBE_E2E_PROCS=%q: %v", p, err)
		}
	}
	res, err := kube.RunE2E(ctx, kube.E2EOptions{BinDir: e2eBin, Kubeconfig: env.Kubeconfig, TestDriver: tdFile,
		Focus: focus, Skip: skip, Procs: procs, Dir: out})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Skips {
		t.Logf("skipped: %s: %s", s.Name, s.Reason)
	}
	for _, f := range res.Failures {
		t.Errorf("failed: %s", f)
	}
	// What the suite left: every volume it made is deleted (PVs gone, the
	// pool holds no image), so no rbd-fuse mapping outlives the run.
	kube.WaitFor(t, e2eWait, "every PV deleted", func(ctx context.Context) (bool, string, error) {
		pvs, err := env.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var left []string
		for _, pv := range pvs.Items {
			left = append(left, pv.Name+"("+string(pv.Status.Phase)+")")
		}
		return len(left) == 0, fmt.Sprintf("PVs left: %v", left), nil
	})
	t.Logf("rbd: %s in %s (suite %s; JUnit %s)", res.Summary(), time.Since(start).Round(time.Second),
		res.Duration.Round(time.Second), res.JUnit)
	fmt.Printf("e2e rbd: %s\n", res.Summary())
}

// sharedDir makes dir a shared bind mount of itself (mounts made below it
// in a pod's Bidirectional volume reach the host), unmounted on t's
// Cleanup, after checking that nothing is left mounted below it.
func sharedDir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind-mount %s: %v", dir, err)
	}
	t.Cleanup(func() {
		for _, m := range mountsBelow(dir) {
			if m != dir {
				t.Errorf("left mounted below the node plugin's state directory: %s", m)
			}
		}
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatalf("make %s a shared mount: %v", dir, err)
	}
	return dir
}

// rbdTools are the host programs the driver's image carries besides the
// driver: the rbd-fuse mapper, and what it formats, checks, grows, probes
// and mounts with (Debian's e2fsprogs, xfsprogs, util-linux, mount).
var rbdTools = []string{
	"/usr/bin/rbd-fuse",
	"/usr/sbin/mkfs.ext4", "/usr/sbin/mke2fs", "/usr/sbin/e2fsck", "/usr/sbin/fsck.ext4", "/usr/sbin/resize2fs",
	"/usr/sbin/mkfs.xfs", "/usr/sbin/xfs_growfs", "/usr/sbin/xfs_repair", "/usr/sbin/fsck.xfs",
	"/usr/sbin/fsck", "/usr/sbin/blkid", "/usr/sbin/losetup", "/usr/bin/mount", "/usr/bin/umount",
}

// rbdImages builds, as tarballs in dir, the images deploy/node.yaml and
// deploy/controller.yaml run: the driver (with librbd and librados) with
// a static busybox and rbdTools, and each sidecar of sanity/kube's tool
// block under the reference controller.yaml names (kube.SidecarImages
// checks its tag is the version the tool block builds).
func rbdImages(t *testing.T, dir, binDir string) []string {
	t.Helper()
	bin := filepath.Join(dir, "rbd")
	if out, err := exec.Command("go", "build", "-tags", "pacific", "-o", bin, "github.com/csikit/csikit/examples/rbd").CombinedOutput(); err != nil {
		t.Fatalf("build the rbd driver: %v\n%s", err, out)
	}
	tar := filepath.Join(dir, "rbd.tar")
	if err := kube.WriteDriverImage(context.Background(), tar, kube.DriverImage{Ref: rbdImage, Driver: bin, Tools: rbdTools,
		Files: []kube.ImageFile{
			{Path: "/etc/mke2fs.conf", Source: "/etc/mke2fs.conf", Mode: 0o644},
			{Path: "/etc/mtab", Link: "/proc/self/mounts"},
		}}); err != nil {
		t.Fatalf("the rbd image (Debian's rbd-fuse, e2fsprogs, xfsprogs, util-linux, mount): %v", err)
	}
	ctrl, err := os.ReadFile(filepath.Join("..", "..", "deploy", "controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sidecars, err := kube.SidecarImages(dir, binDir, ctrl)
	if err != nil {
		t.Fatal(err)
	}
	if len(sidecars) != 4 {
		t.Fatalf("deploy/controller.yaml: sidecar images %v, want provisioner, attacher, resizer and snapshotter", sidecars)
	}
	return append([]string{tar}, sidecars...)
}

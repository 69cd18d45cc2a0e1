package kube_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/quota"
	"github.com/csikit/csikit/sanity/kube"
)

// e2eKinds are examples/hostpath's volume kinds a StorageClass selects,
// each run of the suite provisioning with its class: the fsType kubelet
// is told (csi.storage.k8s.io/fstype, which the driver also takes for the
// kind of volume), and, for block, the suite's block-volume patterns only.
var e2eKinds = map[string]struct{ fsType, focus, skip string }{
	"directory": {skip: `\(block volmode\)`},
	"ext4":      {fsType: "ext4", skip: `\(block volmode\)`},
	"xfs":       {fsType: "xfs", skip: `\(block volmode\)`},
	"block":     {focus: `\(block volmode\)`},
}

// e2eEnvSkips are the suite's specs this environment cannot run, by their
// exact text (every test pattern; of one kind when kind is set), each with
// the reason: limits of one sandboxed machine, not of the driver. A skip
// with lacks applies only where lacks, given the driver's state directory,
// finds the limit (and says why).
var e2eEnvSkips = []struct {
	kind, spec, reason string
	lacks              func(ctx context.Context, state string) (string, bool)
}{
	{"directory", "provisioning should provision correct filesystem size when restoring snapshot to larger size pvc",
		"a directory volume's statfs shows the whole filesystem of the driver's state directory unless a project quota " +
			"limits the directory (statfs then reports the quota), so a restored volume cannot show more than its source; " +
			"the state directory has no project quotas here", noProjectQuotas},
	{"", "volumeMode should not mount / map unused volumes in a pod",
		"it lists /var/lib/kubelet/pods/<uid>/volumes through nsenter into PID 1's mount namespace from a hostexec pod: " +
			"this kubelet's --root-dir is below the environment's directory, and the sandbox denies opening /proc/1/ns/mnt", nil},
	{"ext4", "volume-expand should resize volume when PVC is edited while pod is using it",
		"growing a mounted ext4 (resize2fs, EXT4_IOC_RESIZE_FS) needs CAP_SYS_RESOURCE, which this sandbox denies even to " +
			"privileged containers (\"Permission denied to resize filesystem\"); examples/hostpath's TestOnlineGrow covers it in the VM lane", nil},
	{"ext4", "[Testpattern: Generic Ephemeral-volume (default fs) (late-binding)] ephemeral should support expansion of pvcs created for ephemeral pvcs",
		"it grows the volume while its pod runs: resize2fs on the mounted ext4 needs CAP_SYS_RESOURCE, which this sandbox denies " +
			"(NodeExpandVolume: \"Permission denied to resize filesystem\"), as for volume-expand's online case above", nil},
}

// noProjectQuotas reports whether the filesystem of state enforces no
// project quotas (quota.Check: this kernel has no quota support), and why.
func noProjectQuotas(ctx context.Context, state string) (string, bool) {
	if err := quota.Check(ctx, state); err != nil {
		return err.Error(), true
	}
	return "", false
}

// TestE2E runs Kubernetes' own storage e2e suite (e2e.test, focus
// External.Storage) against examples/hostpath deployed with its deploy/
// manifests in the kubelet mode, with the test-driver file `csikit
// testdriver` derives from the deployed driver's capabilities. Opt-in
// (sanity/kube/e2e/run.sh): CSIKIT_KUBE_E2E=hostpath, CSIKIT_KUBE_E2E_KIND
// (directory, ext4, xfs or block; default ext4), CSIKIT_KUBE_E2E_FOCUS and
// CSIKIT_KUBE_E2E_SKIP narrow the run, CSIKIT_KUBE_E2E_PROCS runs specs in
// parallel, CSIKIT_KUBE_E2E_DIR keeps the JUnit file and the logs.
func TestE2E(t *testing.T) {
	if os.Getenv("CSIKIT_KUBE_E2E") != "hostpath" {
		t.Skip("Kubernetes' storage e2e suite is opt-in: sanity/kube/e2e/run.sh hostpath [KIND] (CSIKIT_KUBE_E2E=hostpath)")
	}
	kindName := os.Getenv("CSIKIT_KUBE_E2E_KIND")
	if kindName == "" {
		kindName = "ext4"
	}
	kind, ok := e2eKinds[kindName]
	if !ok {
		t.Fatalf("CSIKIT_KUBE_E2E_KIND=%q: want directory, ext4, xfs or block", kindName)
	}
	start := time.Now()
	kubeletPrereqs(t)
	ctx := context.Background()
	binDir, err := kube.EnsureBinaries(ctx, kube.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.EnsureE2EBinaries(ctx, kube.BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	out := os.Getenv("CSIKIT_KUBE_E2E_DIR")
	if out == "" {
		out = t.TempDir()
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := shortTempDir(t, "csikit-e2e-")
	images := deployImages(t, dir, binDir)
	e2eImages, err := kube.E2EImages(ctx, dir, "/bin/busybox", binDir)
	if err != nil {
		t.Fatal(err)
	}
	images = append(images, e2eImages...)
	csikitBin := filepath.Join(dir, "csikit")
	if b, err := exec.Command("go", "build", "-o", csikitBin, "github.com/csikit/csikit/cmd/csikit").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/csikit: %v: %s", err, b)
	}
	t.Logf("binaries and images ready in %s", time.Since(start).Round(time.Second))

	nodeIP, err := kube.HostIP()
	if err != nil {
		t.Fatal(err)
	}
	env := kube.Start(t, kube.Options{
		DriverName: hostpathName, NodeName: "node-1", BinDir: binDir,
		Sidecars: []string{}, // the Deployment's sidecars only
		// The suite runs kubectl exec: the API server must reach kubelet.
		Kubelet: &kube.KubeletOptions{Images: images, NodeIP: nodeIP, CheckLeftovers: true},
		// The suite deletes a namespace per spec and uses generic
		// ephemeral volumes (owned by their pods).
		ExtraArgs: map[string][]string{"kube-controller-manager": {
			"--controllers=namespace-controller,garbage-collector-controller,ephemeral-volume-controller"}},
	})
	applyHostpathDeploy(t, env, "rbac.yaml", "csidriver.yaml", "volumesnapshotclass.yaml")
	root, state := env.KubeletDir(), hostpathState(env)
	t.Cleanup(func() {
		if t.Failed() {
			env.LogPods(t, deployNS, 30)
		}
	})
	kube.WaitFor(t, kubeletWait, "the DaemonSet's pod Ready", func(ctx context.Context) (bool, string, error) {
		return env.PodsReady(ctx, deployNS, "app=csikit-hostpath-node", 1, 1)
	})
	waitDriverOnNode(t, env)
	kube.WaitFor(t, kubeletWait, "the Deployment's pod Ready", func(ctx context.Context) (bool, string, error) {
		return env.PodsReady(ctx, deployNS, "app=csikit-hostpath-controller", 1, 4)
	})
	t.Logf("driver deployed %s after the start", time.Since(start).Round(time.Second))

	// The StorageClass: deploy/storageclass.yaml's default class, with
	// the kind's fsType for kubelet (and the driver) — logged.
	sc, err := os.ReadFile(filepath.Join("..", "..", "examples", "hostpath", "deploy", "storageclass.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	class, _, _ := strings.Cut(string(sc), "\n---\n")
	if kind.fsType != "" {
		class = strings.Replace(class, "reclaimPolicy: Delete", "reclaimPolicy: Delete\nparameters:\n  csi.storage.k8s.io/fstype: "+kind.fsType, 1)
		t.Logf("storageclass.yaml: the default class with parameters csi.storage.k8s.io/fstype: %s", kind.fsType)
	}
	scFile := filepath.Join(out, "storageclass.yaml")
	if err := os.WriteFile(scFile, []byte(class), 0o644); err != nil {
		t.Fatal(err)
	}
	vscFile, err := filepath.Abs(filepath.Join("..", "..", "examples", "hostpath", "deploy", "volumesnapshotclass.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// What CSI does not show, from the driver's main.go: block volumes,
	// its access modes, volumes that live on one node, the Ephemeral
	// lifecycle mode of csidriver.yaml, a mount option every kind takes
	// (mount.CheckBindFlags allows it on a directory's bind), a volume
	// staged for two PVs at once (kubelet's staging path is per volume
	// handle: the second stage is the first's, answered OK).
	args := []string{"testdriver", filepath.Join(root, "plugins", hostpathName, "csi.sock"),
		"--storage-class", scFile, "--snapshot-class", vscFile, "--block", "--single-node-volume", "--inline", "--mount-options", "noatime",
		"--multiple-pvs-same-id",
		"--access-modes", "SINGLE_NODE_WRITER,SINGLE_NODE_READER_ONLY,SINGLE_NODE_SINGLE_WRITER,SINGLE_NODE_MULTI_WRITER",
		"--fs-types", "," + kind.fsType, "--fs-type", kind.fsType}
	if kind.fsType == "" {
		args[len(args)-3] = ""
	}
	// The smallest claim is csikit testdriver's: the smallest file system
	// mkfs makes of the kind's type (xfs: 300Mi), as the driver makes no
	// smaller volume (its restore and clone claims ask for the minimum,
	// which the provisioner refuses below the source's size).
	td, err := exec.Command(csikitBin, args...).Output()
	if err != nil {
		t.Fatalf("csikit %s: %v", strings.Join(args, " "), err)
	}
	tdFile := filepath.Join(out, "test-driver.yaml")
	if err := os.WriteFile(tdFile, td, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("test-driver.yaml (csikit %s):\n%s", strings.Join(args, " "), td)

	// The kind's pattern first: the test pattern ("[Testpattern: Dynamic
	// PV (block volmode)]") comes before the suite's name in a spec's
	// text, which FOCUS usually names ("\] (provisioning|...) ").
	focus := "External.Storage"
	if kind.focus != "" {
		focus += ".*" + kind.focus
	}
	if f := os.Getenv("CSIKIT_KUBE_E2E_FOCUS"); f != "" {
		focus += ".*(" + f + ")"
	}
	skip := kind.skip
	for _, s := range e2eEnvSkips {
		if s.kind != "" && s.kind != kindName {
			continue
		}
		reason := s.reason
		if s.lacks != nil {
			why, lacks := s.lacks(ctx, state)
			if !lacks {
				continue
			}
			reason += " (" + why + ")"
		}
		skip = strings.TrimPrefix(skip+"|"+regexp.QuoteMeta(s.spec), "|")
		t.Logf("skipped by name: %q: %s", s.spec, reason)
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
	e2eBin, err := kube.BinariesDir(kube.BuildOptions{})
	if err != nil {
		t.Fatal(err)
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
	t.Logf("hostpath %s: %s in %s (suite %s; JUnit %s)", kindName, res.Summary(), time.Since(start).Round(time.Second),
		res.Duration.Round(time.Second), res.JUnit)
	fmt.Printf("e2e hostpath %s: %s\n", kindName, res.Summary())
}

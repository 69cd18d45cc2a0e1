package kube_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/csikit/csikit/sanity/kube"
)

// A vendor's test runs its driver as its deploy/ manifests ship it: the
// driver's image built from host files, the sidecars' images from the
// tool block under the references controller.yaml names, a real kubelet
// pulling neither, and the manifests applied with only the image and
// host paths substituted.
func ExampleEnv_ApplyFile() {
	var t *testing.T // the test's *testing.T
	ctx := context.Background()
	binDir, err := kube.EnsureBinaries(ctx, kube.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	driverTar := filepath.Join(dir, "mydriver.tar")
	if err := kube.WriteDriverImage(ctx, driverTar, kube.DriverImage{
		Ref: "csikit.local/mydriver:test", Driver: "/path/to/mydriver", // built by the test
		Tools: []string{"/usr/sbin/mkfs.ext4", "/usr/sbin/blkid"},
		Files: []kube.ImageFile{{Path: "/etc/mke2fs.conf", Source: "/etc/mke2fs.conf", Mode: 0o644}},
	}); err != nil {
		t.Fatal(err)
	}
	ctrl, err := os.ReadFile("deploy/controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sidecars, err := kube.SidecarImages(dir, binDir, ctrl)
	if err != nil {
		t.Fatal(err)
	}
	nodeIP, err := kube.HostIP() // the API server reaches kubelet (kubectl exec)
	if err != nil {
		t.Fatal(err)
	}
	env := kube.Start(t, kube.Options{
		DriverName: "block.vendor.example", BinDir: binDir,
		Sidecars: []string{}, // the Deployment's, not the harness's
		Kubelet: &kube.KubeletOptions{Images: append(sidecars, driverTar), NodeIP: nodeIP,
			CheckLeftovers: true},
	})
	for _, m := range []string{"rbac.yaml", "csidriver.yaml", "storageclass.yaml"} {
		env.ApplyFile(t, filepath.Join("deploy", m))
	}
	env.ApplyFile(t, "deploy/node.yaml",
		"vendor/mydriver:latest", "csikit.local/mydriver:test",
		"/var/lib/kubelet", env.KubeletDir())
	env.ApplyFile(t, "deploy/controller.yaml", "vendor/mydriver:latest", "csikit.local/mydriver:test")
	t.Cleanup(func() {
		if t.Failed() {
			env.LogPods(t, "vendor-system", 40)
		}
	})
	kube.WaitFor(t, 3*time.Minute, "the node plugin's pod Ready", func(ctx context.Context) (bool, string, error) {
		return env.PodsReady(ctx, "vendor-system", "app=mydriver-node", 1, 1)
	})
	if d := env.WaitDriverRegistered(t, 3*time.Minute, "node-1", "block.vendor.example"); d.NodeID != "node-1" {
		t.Errorf("the node plugin registered node ID %q", d.NodeID)
	}
}

// A node-loss test: node-2 hangs, turns NotReady, is declared out of
// service so that its pods and volumes move, and comes back.
func ExampleEnv_SetOutOfService() {
	var t *testing.T // the test's *testing.T
	env := kube.Start(t, kube.Options{
		DriverName: "block.vendor.example", Endpoint: "unix:///tmp/csi-example/csi.sock",
		ExtraArgs: map[string][]string{kube.BinControllerManager: {
			"--controllers=taint-eviction-controller,pod-garbage-collector-controller",
			"--node-monitor-grace-period=12s"}},
		Kubelet: &kube.KubeletOptions{ExtraNodes: []kube.NodeOptions{{Name: "node-2"}}, CheckLeftovers: true},
	})
	// … a pod with a volume runs on node-2 …
	thaw, err := env.FreezeNode("node-2")
	if err != nil {
		t.Fatal(err)
	}
	env.WaitNodeCondition(t, 3*time.Minute, "node-2", corev1.ConditionUnknown)
	env.SetOutOfService(t, time.Minute, "node-2", true)
	// … the pod runs on node-1 with the volume attached there …
	env.SetOutOfService(t, time.Minute, "node-2", false)
	if err := thaw(); err != nil {
		t.Fatal(err)
	}
	env.WaitNodeCondition(t, 3*time.Minute, "node-2", corev1.ConditionTrue)
	if err := env.DeleteClaims(context.Background(), 3*time.Minute, "default"); err != nil {
		t.Error(err)
	}
}

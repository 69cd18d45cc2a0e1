package kube_test

import (
	"context"
	"os"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/sanity/kube"
)

// A vendor's test serves its driver in-process (or runs its binary and
// passes the socket as Endpoint), starts the environment, and then works
// with the API server as a cluster user would.
func ExampleStart() {
	var t *testing.T // the test's *testing.T
	newServer := func() (*csikit.Server, error) {
		return csikit.NewServer(newFakeDriver(), csikit.Options{Name: "block.vendor.example", Version: "v1.0.0"})
	}
	drv := kube.ServeDriver(t, newServer)
	env := kube.Start(t, kube.Options{Endpoint: drv.Endpoint, DriverName: "block.vendor.example"})
	kube.WaitFor(t, time.Minute, "a StorageClass list", func(ctx context.Context) (bool, string, error) {
		_, err := env.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
		return err == nil, "", err
	})
}

// EnsureBinaries builds the control plane and sidecars once per go.sum;
// CI can run it ahead of the tests.
func ExampleEnsureBinaries() {
	dir, err := kube.EnsureBinaries(context.Background(), kube.BuildOptions{})
	if err != nil {
		panic(err)
	}
	_ = kube.MissingBinaries(dir) // empty
}

// A driver binary runs as part of the environment; the driver's deploy/
// manifests are applied with the test's own credentials and pool.
func ExampleOptions_driver() {
	var t *testing.T // the test's *testing.T
	sock := "/tmp/csi-example/csi.sock"
	env := kube.Start(t, kube.Options{
		Endpoint: "unix://" + sock, DriverName: "block.vendor.example",
		Driver: &kube.ProcessOptions{Name: "mydriver", Path: "/path/to/mydriver", Restart: true,
			Args: []string{"--endpoint=unix://" + sock, "--nodeid=node-1"}},
	})
	manifest, _ := os.ReadFile("deploy/storageclass.yaml")
	err := env.Apply(context.Background(), manifest, func(obj any) error {
		if sc, ok := obj.(*storagev1.StorageClass); ok {
			sc.Parameters["pool"] = "test-pool"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, pv := env.WaitPVCBound(t, time.Minute, "default", "data") // after creating a PVC "data"
	_ = pv.Spec.CSI.VolumeHandle
}

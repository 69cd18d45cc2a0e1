package kube_test

import (
	"context"
	"testing"
	"time"

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

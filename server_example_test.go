package csikit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/k8s/csidriver"
	"github.com/csikit/csikit/k8s/testdriver"
)

// ListenAndServe serves until its context ends, then drains in-flight
// calls and removes the socket. A driver's main passes a context cancelled
// by SIGTERM (signal.NotifyContext); here a timeout stands in for it.
func ExampleServer_ListenAndServe() {
	srv, err := csikit.NewServer(volumes{}, csikit.Options{Name: "toy.vendor.example", Version: "v1.0.0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, _ := os.MkdirTemp("", "csikit-example")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "csi.sock")
	ctx, stop := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer stop()
	err = srv.ListenAndServe(ctx, "unix://"+sock)
	_, statErr := os.Stat(sock)
	fmt.Println("served until the context ended:", err)
	fmt.Println("socket removed:", os.IsNotExist(statErr))
	// Output:
	// served until the context ended: <nil>
	// socket removed: true
}

// CSIDriver derives the Kubernetes CSIDriver object from what the server
// advertises, so the deploy manifest is generated, not kept by hand. A nil
// pointer of the driver's type would do as well as a live driver.
func ExampleServer_CSIDriver() {
	srv, err := csikit.NewServer(fullController{}, csikit.Options{Name: "toy.vendor.example", Version: "v1.0.0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	obj, err := srv.CSIDriver(csidriver.Options{LifecycleModes: []csidriver.LifecycleMode{csidriver.Persistent}})
	if err != nil {
		fmt.Println(err)
		return
	}
	y, _ := obj.YAML()
	fmt.Print(string(y))
	// Output:
	// apiVersion: storage.k8s.io/v1
	// kind: CSIDriver
	// metadata:
	//   name: toy.vendor.example
	// spec:
	//   attachRequired: true
	//   podInfoOnMount: false
	//   volumeLifecycleModes:
	//     - Persistent
	//   storageCapacity: false
	//   requiresRepublish: false
	//   seLinuxMount: false
}

// TestDriver derives the test-driver file of Kubernetes' storage e2e
// suite from the same capabilities, plus the server's volume modes and
// access modes: a driver that gains block volumes gains the suite's block
// cases.
func ExampleServer_TestDriver() {
	srv, err := csikit.NewServer(fullController{}, csikit.Options{Name: "toy.vendor.example", Version: "v1.0.0",
		VolumeModes: csikit.Mount | csikit.Block})
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := srv.TestDriver(testdriver.Options{StorageClassFile: "deploy/storageclass.yaml"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.Name, "block:", d.Capabilities[testdriver.Block], "expansion:", d.Capabilities[testdriver.ControllerExpansion])
	// Output:
	// toy.vendor.example block: true expansion: false
}

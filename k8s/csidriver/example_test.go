package csidriver_test

import (
	"fmt"
	"os"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/k8s/csidriver"
)

func ExampleFromCapabilities() {
	// The capabilities the driver's server advertises (csikit derives them
	// from the interfaces the driver implements).
	ctrl := []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{
			Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		}},
	}}
	obj, err := csidriver.FromCapabilities("hostpath.csikit.example", ctrl, nil, csidriver.Options{
		LifecycleModes: []csidriver.LifecycleMode{csidriver.Persistent, csidriver.Ephemeral},
		FSGroupPolicy:  csidriver.File,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// What a --print-csidriver flag of the driver's main would print.
	y, err := obj.YAML()
	if err != nil {
		fmt.Println(err)
		return
	}
	os.Stdout.Write(y)
	// Output:
	// apiVersion: storage.k8s.io/v1
	// kind: CSIDriver
	// metadata:
	//   name: hostpath.csikit.example
	// spec:
	//   attachRequired: false
	//   podInfoOnMount: true
	//   volumeLifecycleModes:
	//     - Persistent
	//     - Ephemeral
	//   storageCapacity: false
	//   fsGroupPolicy: File
	//   requiresRepublish: false
	//   seLinuxMount: false
}

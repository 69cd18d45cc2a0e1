package testdriver_test

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/k8s/testdriver"
)

// The test-driver file for a driver with snapshots and block volumes,
// provisioning with the StorageClass of its deploy directory.
func ExampleFromCapabilities() {
	d, err := testdriver.FromCapabilities("block.vendor.example", testdriver.Capabilities{
		Controller: ctrl(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME, csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT),
	}, testdriver.Options{StorageClassFile: "deploy/storageclass.yaml", Block: true, FSType: "ext4"})
	if err != nil {
		panic(err)
	}
	fmt.Print(string(d.YAML()))
	// Output:
	// StorageClass:
	//   FromFile: "deploy/storageclass.yaml"
	// SnapshotClass:
	//   FromName: true
	// DriverInfo:
	//   Name: "block.vendor.example"
	//   SupportedSizeRange:
	//     Min: "1Mi"
	//   SupportedFsType:
	//     "": {}
	//   Capabilities:
	//     RWX: false
	//     block: true
	//     capReadOnlyMany: false
	//     capacity: false
	//     controllerExpansion: false
	//     exec: true
	//     fsGroup: true
	//     groupSnapshot: false
	//     multiplePVsSameID: false
	//     multipods: true
	//     nodeExpansion: false
	//     offlineExpansion: false
	//     onlineExpansion: false
	//     persistence: true
	//     pvcDataSource: false
	//     readWriteOncePod: true
	//     singleNodeVolume: false
	//     snapshotDataSource: true
	//     snapshotMetadata: false
	//     topology: false
	//     volumeLimits: false
	//     volumeMountGroup: false
}

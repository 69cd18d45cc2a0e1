// Package testdriver writes the test-driver file of Kubernetes' external
// storage e2e suite (test/e2e/storage/external, the -storage.testdriver
// flag of e2e.test) from the same capabilities a driver's CSI server
// advertises, as package k8s/csidriver does for the CSIDriver object: a
// driver that gains snapshots or expansion gains the suites that test them
// without a hand edit.
//
// FromCapabilities maps each capability to the suite's: snapshotDataSource
// from CREATE_DELETE_SNAPSHOT, pvcDataSource from CLONE_VOLUME,
// controllerExpansion and nodeExpansion from the two EXPAND_VOLUME
// capabilities (onlineExpansion and offlineExpansion from the plugin's
// VolumeExpansion type), topology from VOLUME_ACCESSIBILITY_CONSTRAINTS,
// volumeLimits from a max_volumes_per_node, RWX, capReadOnlyMany and
// readWriteOncePod from the access modes, volumeMountGroup from
// VOLUME_MOUNT_GROUP, capacity from GET_CAPACITY, snapshotMetadata from
// SNAPSHOT_METADATA_SERVICE and groupSnapshot from the group controller's
// CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT. What no CSI capability shows
// (block volumes, the filesystem kubelet is told about, whether volumes are
// bound to one node, the StorageClass to test with) comes from Options.
//
// The package does not import the e2e framework or k8s.io/api: Definition
// is a small struct whose YAML field names are those of the suite's
// driverDefinition (the tests pin them), printed in a fixed order with the
// capabilities sorted.
package testdriver

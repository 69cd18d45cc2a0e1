// Package csidriver builds the Kubernetes CSIDriver object (storage.k8s.io/v1)
// for a driver from the same capabilities and options its CSI server
// advertises, and prints it as YAML or JSON, so deploy manifests are
// generated, not hand-kept, and cannot disagree with the driver.
//
// FromCapabilities derives the object: attachRequired from the
// PUBLISH_UNPUBLISH_VOLUME controller capability, storageCapacity from
// GET_CAPACITY, fsGroupPolicy File by default for drivers with the
// VOLUME_MOUNT_GROUP node capability, and the rest (podInfoOnMount,
// volumeLifecycleModes, tokenRequests, requiresRepublish, seLinuxMount, ...)
// from Options. A setting the capabilities contradict, such as
// storageCapacity without GET_CAPACITY, is an InvalidArgument error.
//
// The package does not import k8s.io/api: Object is a small struct of its
// own whose YAML and JSON field names are those of storage.k8s.io/v1
// CSIDriver (the tests pin them). Invariants: output is deterministic (fields
// in the API's order, labels sorted); Validate runs before anything is
// printed; values are quoted whenever a plain YAML scalar could be misread.
package csidriver

// Package keys names the well-known keys Kubernetes puts into CSI requests,
// so drivers use typed accessors instead of string literals:
//
//   - the PVC/PV and VolumeSnapshot metadata the external-provisioner and
//     external-snapshotter add to CreateVolume and CreateSnapshot parameters
//     when run with --extra-create-metadata (PVC, Snapshot);
//   - the pod information kubelet adds to NodePublishVolume's volume context
//     when the CSIDriver object sets podInfoOnMount (Pod), and the
//     service-account tokens it adds when the CSIDriver object lists
//     tokenRequests (Tokens);
//   - the secret-reference parameter names of StorageClasses and
//     VolumeSnapshotClasses (ProvisionerSecretName and friends);
//   - StripReserved, which removes every key with the reserved
//     "csi.storage.k8s.io/" prefix before a driver fingerprints or stores
//     parameters.
//
// Invariants: every function is pure (no I/O, no global state) and never
// modifies the maps it is given. Service-account tokens are secrets: the
// ServiceAccountToken type redacts its value in fmt and log/slog output, and
// errors about malformed tokens never quote the input.
package keys

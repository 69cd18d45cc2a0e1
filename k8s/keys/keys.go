package keys

import "strings"

// Prefix is the key prefix Kubernetes reserves in CSI parameters and volume
// contexts. The sidecars consume (and strip) StorageClass parameters with this
// prefix; the keys a driver does receive with it are metadata it may read but
// should not fingerprint or store (see StripReserved).
const Prefix = "csi.storage.k8s.io/"

// Metadata the external-provisioner adds to CreateVolume parameters when run
// with --extra-create-metadata.
const (
	// PVCName is the name of the PersistentVolumeClaim being provisioned.
	PVCName = Prefix + "pvc/name"
	// PVCNamespace is the namespace of the PersistentVolumeClaim.
	PVCNamespace = Prefix + "pvc/namespace"
	// PVName is the name the PersistentVolume will get; it equals
	// CreateVolumeRequest.Name.
	PVName = Prefix + "pv/name"
)

// Metadata the external-snapshotter adds to CreateSnapshot (and
// CreateVolumeGroupSnapshot) parameters when run with --extra-create-metadata.
const (
	// VolumeSnapshotName is the name of the VolumeSnapshot.
	VolumeSnapshotName = Prefix + "volumesnapshot/name"
	// VolumeSnapshotNamespace is the namespace of the VolumeSnapshot.
	VolumeSnapshotNamespace = Prefix + "volumesnapshot/namespace"
	// VolumeSnapshotContentName is the name of the VolumeSnapshotContent.
	VolumeSnapshotContentName = Prefix + "volumesnapshotcontent/name"
	// VolumeGroupSnapshotName is the name of the VolumeGroupSnapshot.
	VolumeGroupSnapshotName = Prefix + "volumegroupsnapshot/name"
	// VolumeGroupSnapshotNamespace is the namespace of the VolumeGroupSnapshot.
	VolumeGroupSnapshotNamespace = Prefix + "volumegroupsnapshot/namespace"
	// VolumeGroupSnapshotContentName is the name of the
	// VolumeGroupSnapshotContent.
	VolumeGroupSnapshotContentName = Prefix + "volumegroupsnapshotcontent/name"
)

// Pod information kubelet adds to NodePublishVolume's volume context when the
// CSIDriver object sets podInfoOnMount.
const (
	// PodName is the name of the pod the volume is published for.
	PodName = Prefix + "pod.name"
	// PodNamespace is the namespace of that pod.
	PodNamespace = Prefix + "pod.namespace"
	// PodUID is the UID of that pod.
	PodUID = Prefix + "pod.uid"
	// ServiceAccountName is the name of the pod's service account.
	ServiceAccountName = Prefix + "serviceAccount.name"
	// Ephemeral is "true" for a CSI ephemeral inline volume (declared in the
	// pod spec), "false" otherwise.
	Ephemeral = Prefix + "ephemeral"
	// ServiceAccountTokens holds the JSON map of audience to token kubelet
	// adds when the CSIDriver object lists tokenRequests: in the volume
	// context by default, in NodePublishVolume's secrets when the CSIDriver
	// object sets serviceAccountTokenInSecrets. Read it with
	// Tokens, never log it.
	ServiceAccountTokens = Prefix + "serviceAccount.tokens"
)

// FSType is the StorageClass parameter the external-provisioner turns into the
// volume capability's fs_type; drivers never receive it as a parameter.
const FSType = Prefix + "fstype"

// IsReserved reports whether key carries the reserved Prefix.
func IsReserved(key string) bool {
	return strings.HasPrefix(key, Prefix)
}

// StripReserved returns a copy of params without the keys that carry the
// reserved Prefix, i.e. the metadata the sidecars added. Use it before
// fingerprinting parameters for idempotency or storing them with a volume:
// those keys describe the Kubernetes objects, not the volume, and a
// pre-provisioned or migrated volume would not carry them. It returns nil for
// a nil map and never modifies params.
func StripReserved(params map[string]string) map[string]string {
	if params == nil {
		return nil
	}
	out := make(map[string]string, len(params))
	for k, v := range params {
		if !IsReserved(k) {
			out[k] = v
		}
	}
	return out
}

// PVCMetadata is the PersistentVolumeClaim metadata the external-provisioner
// adds to CreateVolume parameters with --extra-create-metadata.
type PVCMetadata struct {
	// Name is the PVC's name.
	Name string
	// Namespace is the PVC's namespace.
	Namespace string
	// PVName is the name of the PersistentVolume being provisioned.
	PVName string
}

// PVC reads the PersistentVolumeClaim metadata from CreateVolume parameters.
// ok is false when the provisioner added none of it (it runs without
// --extra-create-metadata, or the caller is not Kubernetes).
func PVC(params map[string]string) (md PVCMetadata, ok bool) {
	md = PVCMetadata{
		Name:      params[PVCName],
		Namespace: params[PVCNamespace],
		PVName:    params[PVName],
	}
	return md, md != PVCMetadata{}
}

// SnapshotMetadata is the VolumeSnapshot metadata the external-snapshotter
// adds to CreateSnapshot parameters with --extra-create-metadata.
type SnapshotMetadata struct {
	// Name is the VolumeSnapshot's name.
	Name string
	// Namespace is the VolumeSnapshot's namespace.
	Namespace string
	// ContentName is the name of the VolumeSnapshotContent.
	ContentName string
}

// Snapshot reads the VolumeSnapshot metadata from CreateSnapshot parameters;
// ok is false when none is present.
func Snapshot(params map[string]string) (md SnapshotMetadata, ok bool) {
	md = SnapshotMetadata{
		Name:        params[VolumeSnapshotName],
		Namespace:   params[VolumeSnapshotNamespace],
		ContentName: params[VolumeSnapshotContentName],
	}
	return md, md != SnapshotMetadata{}
}

package keys

// Secret-reference parameters of StorageClasses. The external-provisioner
// (and, for expansion and publishing, the other sidecars and kubelet) resolve
// them to a Secret and pass its data in the secrets field of the named CSI
// call; the driver never sees the keys themselves. Values may use the
// templates ${pv.name}, ${pvc.name}, ${pvc.namespace} and
// ${pvc.annotations['key']} where the sidecar documents them.
const (
	// SecretName and SecretNamespace name the default Secret for every call
	// below that has no Secret of its own.
	SecretName      = Prefix + "secret-name"
	SecretNamespace = Prefix + "secret-namespace"

	// ProvisionerSecretName and ProvisionerSecretNamespace name the Secret
	// for CreateVolume and DeleteVolume.
	ProvisionerSecretName      = Prefix + "provisioner-secret-name"
	ProvisionerSecretNamespace = Prefix + "provisioner-secret-namespace"

	// ControllerPublishSecretName and ControllerPublishSecretNamespace name
	// the Secret for ControllerPublishVolume and ControllerUnpublishVolume.
	ControllerPublishSecretName      = Prefix + "controller-publish-secret-name"
	ControllerPublishSecretNamespace = Prefix + "controller-publish-secret-namespace"

	// NodeStageSecretName and NodeStageSecretNamespace name the Secret for
	// NodeStageVolume.
	NodeStageSecretName      = Prefix + "node-stage-secret-name"
	NodeStageSecretNamespace = Prefix + "node-stage-secret-namespace"

	// NodePublishSecretName and NodePublishSecretNamespace name the Secret
	// for NodePublishVolume.
	NodePublishSecretName      = Prefix + "node-publish-secret-name"
	NodePublishSecretNamespace = Prefix + "node-publish-secret-namespace"

	// ControllerExpandSecretName and ControllerExpandSecretNamespace name the
	// Secret for ControllerExpandVolume.
	ControllerExpandSecretName      = Prefix + "controller-expand-secret-name"
	ControllerExpandSecretNamespace = Prefix + "controller-expand-secret-namespace"

	// NodeExpandSecretName and NodeExpandSecretNamespace name the Secret for
	// NodeExpandVolume.
	NodeExpandSecretName      = Prefix + "node-expand-secret-name"
	NodeExpandSecretNamespace = Prefix + "node-expand-secret-namespace"
)

// Secret-reference parameters of VolumeSnapshotClasses and
// VolumeGroupSnapshotClasses, resolved by the external-snapshotter.
const (
	// SnapshotterSecretName and SnapshotterSecretNamespace name the Secret
	// for CreateSnapshot and DeleteSnapshot.
	SnapshotterSecretName      = Prefix + "snapshotter-secret-name"
	SnapshotterSecretNamespace = Prefix + "snapshotter-secret-namespace"

	// SnapshotterListSecretName and SnapshotterListSecretNamespace name the
	// Secret for ListSnapshots.
	SnapshotterListSecretName      = Prefix + "snapshotter-list-secret-name"
	SnapshotterListSecretNamespace = Prefix + "snapshotter-list-secret-namespace"

	// GroupSnapshotterSecretName and GroupSnapshotterSecretNamespace name the
	// Secret for CreateVolumeGroupSnapshot and DeleteVolumeGroupSnapshot.
	GroupSnapshotterSecretName      = Prefix + "group-snapshotter-secret-name"
	GroupSnapshotterSecretNamespace = Prefix + "group-snapshotter-secret-namespace"
)

// SecretRef is the pair of parameter keys that names one Secret.
type SecretRef struct {
	// NameKey is the parameter holding the Secret's name.
	NameKey string
	// NamespaceKey is the parameter holding the Secret's namespace.
	NamespaceKey string
}

// SecretRefs returns every secret-reference key pair above, StorageClass ones
// first, in a fixed order; a new slice on every call. Deployment tooling can
// use it to write or check StorageClass and VolumeSnapshotClass parameters.
func SecretRefs() []SecretRef {
	return []SecretRef{
		{SecretName, SecretNamespace},
		{ProvisionerSecretName, ProvisionerSecretNamespace},
		{ControllerPublishSecretName, ControllerPublishSecretNamespace},
		{NodeStageSecretName, NodeStageSecretNamespace},
		{NodePublishSecretName, NodePublishSecretNamespace},
		{ControllerExpandSecretName, ControllerExpandSecretNamespace},
		{NodeExpandSecretName, NodeExpandSecretNamespace},
		{SnapshotterSecretName, SnapshotterSecretNamespace},
		{SnapshotterListSecretName, SnapshotterListSecretNamespace},
		{GroupSnapshotterSecretName, GroupSnapshotterSecretNamespace},
	}
}

// IsSecretRef reports whether key is one of the secret-reference parameter
// keys above.
func IsSecretRef(key string) bool {
	for _, r := range SecretRefs() {
		if key == r.NameKey || key == r.NamespaceKey {
			return true
		}
	}
	return false
}

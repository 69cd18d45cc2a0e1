package csidriver

import (
	"maps"
	"slices"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// Options are the CSIDriver settings no CSI capability can express.
type Options struct {
	// PodInfoOnMount asks kubelet for pod information in NodePublishVolume's
	// volume context (see k8s/keys.Pod). It is forced on when
	// LifecycleModes holds both Persistent and Ephemeral, because only the
	// pod information tells the two apart.
	PodInfoOnMount bool
	// LifecycleModes are the volume lifecycle modes the driver supports;
	// default [Persistent].
	LifecycleModes []LifecycleMode
	// FSGroupPolicy is how kubelet applies a pod's fsGroup. Empty means File
	// for a driver with the VOLUME_MOUNT_GROUP node capability (kubelet then
	// passes fsGroup to it) and the API default otherwise.
	FSGroupPolicy FSGroupPolicy
	// TokenRequests ask kubelet for service-account tokens on
	// NodePublishVolume (see k8s/keys.Tokens).
	TokenRequests []TokenRequest
	// ServiceAccountTokenInSecrets makes kubelet pass those tokens in
	// NodePublishVolume's secrets instead of its volume context.
	ServiceAccountTokenInSecrets bool
	// RequiresRepublish makes kubelet call NodePublishVolume periodically,
	// e.g. to refresh tokens.
	RequiresRepublish bool
	// SELinuxMount says every volume can be mounted with its own
	// "-o context=..." option.
	SELinuxMount bool
	// StorageCapacity overrides storageCapacity, which defaults to whether
	// the driver has the GET_CAPACITY controller capability. Set it to false
	// when the deployment does not run external-provisioner with
	// --enable-capacity; true without GET_CAPACITY is an error.
	StorageCapacity *bool
	// NodeAllocatableUpdatePeriod, when non-zero, makes kubelet refresh the
	// node's volume limit that often (at least 10s, whole seconds).
	NodeAllocatableUpdatePeriod time.Duration
	// Labels are the object's metadata.labels.
	Labels map[string]string
}

// FromCapabilities derives the CSIDriver object for driver name from the
// controller and node capabilities the driver's server advertises and opts.
// It returns InvalidArgument for invalid options or options the capabilities
// contradict.
func FromCapabilities(name string, ctrl []*csi.ControllerServiceCapability, node []*csi.NodeServiceCapability, opts Options) (*Object, error) {
	hasCtrl := func(t csi.ControllerServiceCapability_RPC_Type) bool {
		return slices.ContainsFunc(ctrl, func(c *csi.ControllerServiceCapability) bool { return c.GetRpc().GetType() == t })
	}
	hasNode := func(t csi.NodeServiceCapability_RPC_Type) bool {
		return slices.ContainsFunc(node, func(c *csi.NodeServiceCapability) bool { return c.GetRpc().GetType() == t })
	}

	modes := slices.Clone(opts.LifecycleModes)
	if len(modes) == 0 {
		modes = []LifecycleMode{Persistent}
	}
	podInfo := opts.PodInfoOnMount || slices.Contains(modes, Persistent) && slices.Contains(modes, Ephemeral)

	capacity := hasCtrl(csi.ControllerServiceCapability_RPC_GET_CAPACITY)
	if opts.StorageCapacity != nil {
		if *opts.StorageCapacity && !capacity {
			return nil, invalid("storageCapacity: got true without the GET_CAPACITY controller capability, want GetCapacity implemented first")
		}
		capacity = *opts.StorageCapacity
	}

	policy := opts.FSGroupPolicy
	if policy == "" && hasNode(csi.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP) {
		policy = File
	}

	o := &Object{
		Name:                 name,
		Labels:               maps.Clone(opts.Labels),
		AttachRequired:       ptr(hasCtrl(csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME)),
		PodInfoOnMount:       ptr(podInfo),
		VolumeLifecycleModes: modes,
		StorageCapacity:      ptr(capacity),
		FSGroupPolicy:        policy,
		TokenRequests:        slices.Clone(opts.TokenRequests),
		RequiresRepublish:    ptr(opts.RequiresRepublish),
		SELinuxMount:         ptr(opts.SELinuxMount),
	}
	if opts.ServiceAccountTokenInSecrets {
		o.ServiceAccountTokenInSecrets = ptr(true)
	}
	if p := opts.NodeAllocatableUpdatePeriod; p != 0 {
		if p%time.Second != 0 {
			return nil, invalid("NodeAllocatableUpdatePeriod: got %v, want whole seconds", p)
		}
		o.NodeAllocatableUpdatePeriodSeconds = ptr(int64(p / time.Second))
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

func ptr[T any](v T) *T { return &v }

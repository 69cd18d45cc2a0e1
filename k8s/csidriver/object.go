package csidriver

import (
	"maps"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/csi/validation"
)

// APIVersion and Kind identify the object this package emits.
const (
	APIVersion = "storage.k8s.io/v1"
	Kind       = "CSIDriver"
)

// LifecycleMode is a storage.k8s.io/v1 VolumeLifecycleMode.
type LifecycleMode string

// The lifecycle modes Kubernetes knows.
const (
	// Persistent volumes are provisioned through PVCs and PVs.
	Persistent LifecycleMode = "Persistent"
	// Ephemeral volumes are declared inline in a pod spec; the driver only
	// gets NodePublishVolume and NodeUnpublishVolume for them.
	Ephemeral LifecycleMode = "Ephemeral"
)

// FSGroupPolicy is a storage.k8s.io/v1 FSGroupPolicy.
type FSGroupPolicy string

// The fsGroup policies Kubernetes knows.
const (
	// ReadWriteOnceWithFSType applies fsGroup only to volumes with an fsType
	// and a ReadWriteOnce(Pod) access mode; Kubernetes' default.
	ReadWriteOnceWithFSType FSGroupPolicy = "ReadWriteOnceWithFSType"
	// File always applies fsGroup (or delegates it to a driver with the
	// VOLUME_MOUNT_GROUP node capability).
	File FSGroupPolicy = "File"
	// None never changes ownership or permissions.
	None FSGroupPolicy = "None"
)

// TokenRequest asks kubelet for a service-account token for an audience
// (storage.k8s.io/v1 TokenRequest).
type TokenRequest struct {
	// Audience is the token's audience; "" means the API server's.
	Audience string
	// ExpirationSeconds is the token's lifetime; 0 leaves it unset
	// (kubelet's default). When set it must be at least 600.
	ExpirationSeconds int64
}

// Object is a CSIDriver object: its metadata and every storage.k8s.io/v1
// CSIDriverSpec field. Nil pointers and empty values are omitted from the
// output, so the API server's defaults apply to them.
type Object struct {
	// Name is metadata.name: the driver name GetPluginInfo returns.
	Name string
	// Labels are metadata.labels.
	Labels map[string]string

	// AttachRequired is spec.attachRequired (API default: true).
	AttachRequired *bool
	// PodInfoOnMount is spec.podInfoOnMount.
	PodInfoOnMount *bool
	// VolumeLifecycleModes is spec.volumeLifecycleModes (API default:
	// Persistent).
	VolumeLifecycleModes []LifecycleMode
	// StorageCapacity is spec.storageCapacity.
	StorageCapacity *bool
	// FSGroupPolicy is spec.fsGroupPolicy; "" leaves the API default.
	FSGroupPolicy FSGroupPolicy
	// TokenRequests is spec.tokenRequests.
	TokenRequests []TokenRequest
	// RequiresRepublish is spec.requiresRepublish.
	RequiresRepublish *bool
	// SELinuxMount is spec.seLinuxMount.
	SELinuxMount *bool
	// NodeAllocatableUpdatePeriodSeconds is
	// spec.nodeAllocatableUpdatePeriodSeconds (at least 10 when set).
	NodeAllocatableUpdatePeriodSeconds *int64
	// ServiceAccountTokenInSecrets is spec.serviceAccountTokenInSecrets
	// (only with TokenRequests).
	ServiceAccountTokenInSecrets *bool
}

// Validate applies the API server's rules for the fields Object holds and
// returns InvalidArgument naming the first violation.
func (o *Object) Validate() error {
	if !validation.ValidPluginName(o.Name) {
		return invalid("metadata.name %q: want the CSI driver name: %s", o.Name, validation.PluginNameRule)
	}
	for _, k := range slices.Sorted(maps.Keys(o.Labels)) {
		if !validLabelKey(k) {
			return invalid("metadata.labels key %q: want an optional DNS-subdomain prefix and '/', then 1-63 alphanumerics, '-', '_' or '.', alphanumeric at both ends", k)
		}
		if v := o.Labels[k]; v != "" && !validLabelName(v) {
			return invalid("metadata.labels[%q] value %q: want empty or 1-63 alphanumerics, '-', '_' or '.', alphanumeric at both ends", k, v)
		}
	}
	for i, m := range o.VolumeLifecycleModes {
		if m != Persistent && m != Ephemeral {
			return invalid("spec.volumeLifecycleModes[%d]: got %q, want %q or %q", i, m, Persistent, Ephemeral)
		}
		if slices.Index(o.VolumeLifecycleModes, m) != i {
			return invalid("spec.volumeLifecycleModes[%d]: got %q twice, want a set", i, m)
		}
	}
	switch o.FSGroupPolicy {
	case "", ReadWriteOnceWithFSType, File, None:
	default:
		return invalid("spec.fsGroupPolicy: got %q, want %q, %q or %q", o.FSGroupPolicy, ReadWriteOnceWithFSType, File, None)
	}
	seen := map[string]bool{}
	for i, tr := range o.TokenRequests {
		if seen[tr.Audience] {
			return invalid("spec.tokenRequests[%d].audience: got %q twice, want unique audiences", i, tr.Audience)
		}
		seen[tr.Audience] = true
		if tr.ExpirationSeconds != 0 && (tr.ExpirationSeconds < 600 || tr.ExpirationSeconds > 1<<32) {
			return invalid("spec.tokenRequests[%d].expirationSeconds: got %d, want 0 (unset) or 600 to %d", i, tr.ExpirationSeconds, int64(1)<<32)
		}
	}
	if p := o.NodeAllocatableUpdatePeriodSeconds; p != nil && *p < 10 {
		return invalid("spec.nodeAllocatableUpdatePeriodSeconds: got %d, want at least 10", *p)
	}
	if o.ServiceAccountTokenInSecrets != nil && *o.ServiceAccountTokenInSecrets && len(o.TokenRequests) == 0 {
		return invalid("spec.serviceAccountTokenInSecrets: got true without tokenRequests, want tokenRequests set too")
	}
	return nil
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "csidriver: "+format, args...)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validLabelName is Kubernetes' qualified-name rule (name part).
func validLabelName(s string) bool {
	if len(s) == 0 || len(s) > 63 || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// validLabelKey is [DNS-subdomain "/"] name.
func validLabelKey(k string) bool {
	prefix, name, ok := strings.Cut(k, "/")
	if !ok {
		return validLabelName(k)
	}
	if len(prefix) == 0 || len(prefix) > 253 {
		return false
	}
	for _, l := range strings.Split(prefix, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return validLabelName(name)
}

package validation

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// A rule checks one field of a request. The table in table.go lists, per
// RPC, the rules its request must obey, in the order they are checked.
type rule struct {
	field string                             // proto field name, as in messages
	check func(req any, cfg *Config) problem // req is the method's request type
}

// method is one table entry: the RPC's short name, a type test for its
// request and the rules.
type method struct {
	rpc   string
	is    func(req any) bool
	rules []rule
}

// on builds a table entry for requests of type T.
func on[T any](rpc string, rules ...rule) method {
	return method{
		rpc:   rpc,
		is:    func(req any) bool { _, ok := req.(T); return ok },
		rules: rules,
	}
}

// The constructors below turn an accessor (usually a protobuf getter, which
// is nil-safe) into a rule.

func requiredID[T any](field string, get func(T) string) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		return checkID(get(t), cfg.maxID(), true)
	}}
}

func optionalID[T any](field string, get func(T) string) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		return checkID(get(t), cfg.maxID(), false)
	}}
}

func requiredName[T any](field string, get func(T) string) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		return checkName(get(t), cfg.maxName())
	}}
}

func requiredNodeID[T any](field string, get func(T) string) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		return checkID(get(t), cfg.maxNodeID(), true)
	}}
}

func optionalNodeID[T any](field string, get func(T) string) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		return checkID(get(t), cfg.maxNodeID(), false)
	}}
}

func requiredIDs[T any](field string, get func(T) []string) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		return checkIDs(get(t), cfg.maxID(), true)
	}}
}

func optionalIDs[T any](field string, get func(T) []string) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		return checkIDs(get(t), cfg.maxID(), false)
	}}
}

// requiredPath: an absolute path the driver acts on (target, staging).
func requiredPath[T any](field string, get func(T) string) rule {
	return rule{field, func(req any, _ *Config) problem {
		t, _ := req.(T)
		return checkPath(get(t), true, invalid)
	}}
}

func optionalPath[T any](field string, get func(T) string) rule {
	return rule{field, func(req any, _ *Config) problem {
		t, _ := req.(T)
		return checkPath(get(t), false, invalid)
	}}
}

// lookupPath: a required path where the volume is looked for; a relative one
// cannot hold a volume, so it is NotFound (what csi-sanity expects).
func lookupPath[T any](field string, get func(T) string) rule {
	return rule{field, func(req any, _ *Config) problem {
		t, _ := req.(T)
		return checkPath(get(t), true, notFound)
	}}
}

// stagingPath: required when the node plugin stages volumes, except for
// CSI ephemeral inline volumes, which kubelet publishes without staging
// (volume_context "csi.storage.k8s.io/ephemeral" = "true").
func stagingPath[T any](field string, get func(T) string) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		s := get(t)
		if s == "" && cfg.StageUnstage && !ephemeral(req) {
			// The spec's NodePublishVolume error table: "Staging target
			// path not set" is FAILED_PRECONDITION.
			return failedPrecondition("is required: the node plugin stages volumes (STAGE_UNSTAGE_VOLUME)")
		}
		return checkPath(s, false, invalid)
	}}
}

// requiredCapability: present, well-formed and supported by cfg.
func requiredCapability[T any](field string, get func(T) *csi.VolumeCapability) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		return checkCapability(get(t), cfg, true)
	}}
}

// optionalCapability: when present, well-formed and supported by cfg.
func optionalCapability[T any](field string, get func(T) *csi.VolumeCapability) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		if c := get(t); c != nil {
			return checkCapability(c, cfg, true)
		}
		return passed
	}}
}

// requiredCapabilities: non-empty, each well-formed and supported.
func requiredCapabilities[T any](field string, get func(T) []*csi.VolumeCapability) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		return checkCapabilities(get(t), cfg, true, true)
	}}
}

// presentCapabilities: non-empty when required, each well-formed; support is
// the driver's answer, not an error.
func presentCapabilities[T any](field string, required bool, get func(T) []*csi.VolumeCapability) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		return checkCapabilities(get(t), cfg, required, false)
	}}
}

func requiredCapacity[T any](field string, get func(T) *csi.CapacityRange) rule {
	return rule{field, func(req any, _ *Config) problem {
		t, _ := req.(T)
		return checkCapacity(get(t), true)
	}}
}

func optionalCapacity[T any](field string, get func(T) *csi.CapacityRange) rule {
	return rule{field, func(req any, _ *Config) problem {
		t, _ := req.(T)
		return checkCapacity(get(t), false)
	}}
}

func contentSource[T any](field string, get func(T) *csi.VolumeContentSource) rule {
	return rule{field, func(req any, cfg *Config) problem {
		t, _ := req.(T)
		return checkContentSource(get(t), cfg)
	}}
}

func topology[T any](field string, get func(T) *csi.TopologyRequirement) rule {
	return rule{field, func(req any, _ *Config) problem {
		t, _ := req.(T)
		return checkTopology(get(t))
	}}
}

func nonNegative32[T any](field string, get func(T) int32) rule {
	return rule{field, func(req any, _ *Config) problem {
		t, _ := req.(T)
		return checkNonNegative(int64(get(t)))
	}}
}

// startingOffset is SnapshotMetadata's starting_offset: a negative one is
// OUT_OF_RANGE, as the spec's error tables say (not INVALID_ARGUMENT). One
// beyond the volume's size is OUT_OF_RANGE too, but only the driver knows
// the size.
func startingOffset[T any](field string, get func(T) int64) rule {
	return rule{field, func(req any, _ *Config) problem {
		t, _ := req.(T)
		if n := get(t); n < 0 {
			return problem{code: codes.OutOfRange, what: "must not be negative, got %d", args: []any{n}}
		}
		return passed
	}}
}

// when builds a rule from a predicate: ok(req) false fails with what.
func when[T any](field, what string, ok func(T) bool) rule {
	return rule{field, func(req any, _ *Config) problem {
		t, _ := req.(T)
		if ok(t) {
			return passed
		}
		return invalid(what)
	}}
}

// ephemeralKey is the volume_context key kubelet sets on CSI ephemeral
// inline volumes.
const ephemeralKey = "csi.storage.k8s.io/ephemeral"

// ephemeral reports whether req publishes a CSI ephemeral inline volume.
func ephemeral(req any) bool {
	r, ok := req.(*csi.NodePublishVolumeRequest)
	return ok && r.GetVolumeContext()[ephemeralKey] == "true"
}

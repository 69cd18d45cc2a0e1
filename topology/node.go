package topology

import (
	"maps"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeOptions describes the topology a node reports in NodeGetInfo.
type NodeOptions struct {
	// Segments are the node's topological segments, e.g.
	// {"topology.block.vendor.example/zone": "z1"}. Keys and values must
	// follow the spec's rules (see Validate).
	Segments map[string]string
	// NodeKey, when set, adds the segment NodeKey=NodeID: the usual way for
	// node-local storage to pin a volume to the node that holds it, e.g.
	// Key("topology.hostpath.example", "node").
	NodeKey string
	// NodeID is the value for NodeKey: typically the node ID the driver
	// reports (which must then also satisfy the value rules).
	NodeID string
}

// Node builds the accessible topology a node reports in NodeGetInfo, checked
// against the spec's rules. It returns InvalidArgument for a bad key or value
// and nil, nil when there are no segments at all (the node reports no
// topology).
func Node(opts NodeOptions) (*csi.Topology, error) {
	seg := maps.Clone(opts.Segments)
	if opts.NodeKey != "" {
		if seg == nil {
			seg = map[string]string{}
		}
		if old, ok := seg[opts.NodeKey]; ok && old != opts.NodeID {
			return nil, status.Errorf(codes.InvalidArgument,
				"topology: node key %q: got %q in Segments and NodeID %q, want one value", opts.NodeKey, old, opts.NodeID)
		}
		seg[opts.NodeKey] = opts.NodeID
	}
	if len(seg) == 0 {
		return nil, nil
	}
	t := &csi.Topology{Segments: seg}
	if err := Validate(t); err != nil {
		return nil, err
	}
	return t, nil
}

// Key joins a prefix (the driver's domain, e.g. "topology.block.vendor.example")
// and a name (e.g. "zone") into a topology key.
func Key(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "/" + name
}

// Validate checks a topology against the spec's rules: each key is an
// optional prefix (at most 63 characters, lower-case DNS notation) and a
// name (1–63 characters, alphanumeric at both ends, '-', '_', '.' between);
// all prefixed keys share one prefix; no two keys differ only in case; each
// value is 1–63 characters, alphanumeric at both ends, '-', '_', '.' between.
// It returns InvalidArgument naming the first offending key.
func Validate(t *csi.Topology) error {
	prefix := ""
	lower := make(map[string]string, len(t.GetSegments()))
	for k, v := range t.GetSegments() {
		p, name, hasPrefix := strings.Cut(k, "/")
		if !hasPrefix {
			p, name = "", k
		}
		if hasPrefix && !validPrefix(p) {
			return status.Errorf(codes.InvalidArgument,
				"topology key %q: got prefix %q, want at most 63 lower-case alphanumerics, '-' or '.', alphanumeric at both ends", k, p)
		}
		if !validName(name) {
			return status.Errorf(codes.InvalidArgument,
				"topology key %q: got name %q, want 1-63 alphanumerics, '-', '_' or '.', alphanumeric at both ends", k, name)
		}
		if hasPrefix {
			if prefix != "" && p != prefix {
				return status.Errorf(codes.InvalidArgument,
					"topology key %q: got prefix %q next to prefix %q, want one prefix across all keys", k, p, prefix)
			}
			prefix = p
		}
		if other, ok := lower[strings.ToLower(k)]; ok {
			return status.Errorf(codes.InvalidArgument,
				"topology keys %q and %q: got keys that differ only in case, want case-insensitively unique keys", other, k)
		}
		lower[strings.ToLower(k)] = k
		if !validName(v) {
			return status.Errorf(codes.InvalidArgument,
				"topology key %q: got value %q, want 1-63 alphanumerics, '-', '_' or '.', alphanumeric at both ends", k, v)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validName: 1-63 chars, alphanumeric ends, [-_.] or alphanumerics between.
func validName(s string) bool {
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

// validPrefix: 1-63 chars of lower-case alphanumerics, '-', '.', with
// lower-case alphanumeric ends and DNS labels (no empty label, no label
// starting or ending with '-').
func validPrefix(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Accessible reports whether a volume accessible from the given topologies
// (CreateVolumeResponse's accessible_topology) can be used on a node with the
// given accessible topology: some volume topology serves the node's (see
// Serves). A volume without topology is accessible everywhere.
func Accessible(volume []*csi.Topology, node *csi.Topology) bool {
	if len(volume) == 0 {
		return true
	}
	for _, v := range volume {
		if Serves(v, node) {
			return true
		}
	}
	return false
}

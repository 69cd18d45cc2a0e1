package topology

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Serves reports whether a volume placed in the backend segment avail is
// accessible from the requirement term: every key of avail must be in term
// with the same value. A nil or empty avail serves every term.
func Serves(avail, term *csi.Topology) bool {
	for k, v := range avail.GetSegments() {
		if tv, ok := term.GetSegments()[k]; !ok || tv != v {
			return false
		}
	}
	return true
}

// candidate is one available segment with its place in the preference order.
type candidate struct {
	t         *csi.Topology
	pref      int // index of the first preferred term it serves, len(preferred) if none
	req       int // index of the first requisite term it serves, len(requisite) if none
	avail     int // index in available
	requisite bool
}

// rank deduplicates available and orders it by preference. It does not drop
// segments outside the requisite terms; candidate.requisite says which are in.
func rank(req *csi.TopologyRequirement, available []*csi.Topology) ([]candidate, error) {
	if err := checkRequirement(req); err != nil {
		return nil, err
	}
	pref, reqs := req.GetPreferred(), req.GetRequisite()
	out := make([]candidate, 0, len(available))
	// Few segments: compare pairwise, no allocation. Many: index by identity.
	var seen map[string]struct{}
	if len(available) > 8 {
		seen = make(map[string]struct{}, len(available))
	}
	for i, a := range available {
		if a == nil {
			return nil, status.Errorf(codes.InvalidArgument, "available[%d]: got nil topology, want a segment map", i)
		}
		if seen != nil {
			key := canon(a)
			if _, dup := seen[key]; dup {
				continue
			}
			seen[key] = struct{}{}
		} else if slices.ContainsFunc(out, func(c candidate) bool { return maps.Equal(c.t.GetSegments(), a.GetSegments()) }) {
			continue
		}
		c := candidate{t: a, pref: firstServed(a, pref), req: firstServed(a, reqs), avail: i}
		c.requisite = len(reqs) == 0 || c.req < len(reqs)
		out = append(out, c)
	}
	slices.SortStableFunc(out, func(x, y candidate) int {
		if x.pref != y.pref {
			return x.pref - y.pref
		}
		return x.req - y.req
	})
	return out, nil
}

func firstServed(a *csi.Topology, terms []*csi.Topology) int {
	for i, t := range terms {
		if Serves(a, t) {
			return i
		}
	}
	return len(terms)
}

// checkRequirement enforces what the spec asks of the CO: no nil terms, and
// every preferred term is also a requisite term when requisite is given.
func checkRequirement(req *csi.TopologyRequirement) error {
	for i, t := range req.GetRequisite() {
		if t == nil {
			return status.Errorf(codes.InvalidArgument, "accessibility_requirements.requisite[%d]: got nil, want a topology", i)
		}
	}
	for i, t := range req.GetPreferred() {
		if t == nil {
			return status.Errorf(codes.InvalidArgument, "accessibility_requirements.preferred[%d]: got nil, want a topology", i)
		}
		if len(req.GetRequisite()) > 0 && !slices.ContainsFunc(req.GetRequisite(), func(r *csi.Topology) bool {
			return maps.Equal(r.GetSegments(), t.GetSegments())
		}) {
			return status.Errorf(codes.InvalidArgument,
				"accessibility_requirements.preferred[%d] %s: got a topology missing from requisite, want every preferred topology also in requisite",
				i, format(t))
		}
	}
	return nil
}

// Rank returns the available segments a volume may be placed in, deduplicated
// and best first: segments serving an earlier preferred term first, then those
// serving an earlier requisite term, then the order of available. With
// requisite terms, segments serving none of them are left out. A driver that
// places a volume in one segment tries them in this order (the spec's
// "fall back" rule). It returns ResourceExhausted when no segment qualifies.
func Rank(req *csi.TopologyRequirement, available []*csi.Topology) ([]*csi.Topology, error) {
	cands, err := rank(req, available)
	if err != nil {
		return nil, err
	}
	var out []*csi.Topology
	for _, c := range cands {
		if c.requisite {
			out = append(out, c.t)
		}
	}
	if len(out) == 0 {
		return nil, exhausted(req, available, 1)
	}
	return out, nil
}

// Select chooses the n segments (n >= 1, e.g. 2 for a synchronously
// replicated volume) a new volume is made accessible from, out of the
// segments the backend can serve, following the spec's rules for
// TopologyRequirement:
//
//   - Without requirements it takes the first n available segments.
//   - With k requisite terms and n < k, it takes n segments that serve n
//     different requisite terms, preferred terms first in their order.
//   - With n >= k, every requisite term must be served (preferred terms
//     first), and the remaining segments come from all available ones,
//     preferred first.
//
// If the backend fails to create the volume in a chosen segment, drop that
// segment from available and call Select again: the next answer is the
// spec's fall-back. It returns InvalidArgument for a malformed requirement or
// n < 1, and ResourceExhausted when the available segments cannot satisfy
// the requirement.
func Select(req *csi.TopologyRequirement, available []*csi.Topology, n int) ([]*csi.Topology, error) {
	if n < 1 {
		return nil, status.Errorf(codes.InvalidArgument, "topology.Select: got n=%d segments, want at least 1", n)
	}
	cands, err := rank(req, available)
	if err != nil {
		return nil, err
	}
	reqs := req.GetRequisite()
	picked := make([]bool, len(cands))
	var out []*csi.Topology
	take := func(i int) { picked[i] = true; out = append(out, cands[i].t) }

	switch {
	case len(reqs) == 0:
		// No bound: the best n of everything.
	case n < len(reqs):
		covered := make([]bool, len(reqs))
		for i, c := range cands {
			if len(out) == n {
				break
			}
			if c.requisite && coversNew(c.t, reqs, covered) {
				take(i)
			}
		}
		if len(out) < n {
			return nil, exhausted(req, available, n)
		}
		return out, nil
	default:
		covered := make([]bool, len(reqs))
		for _, ti := range termOrder(req) {
			if covered[ti] {
				continue
			}
			// An uncovered term is served by no picked candidate yet.
			i := slices.IndexFunc(cands, func(c candidate) bool { return Serves(c.t, reqs[ti]) })
			if i < 0 {
				return nil, status.Errorf(codes.ResourceExhausted,
					"accessibility_requirements.requisite[%d] %s: no available segment serves it (available: %s), want every requisite topology served for a volume spanning %d segments",
					ti, format(reqs[ti]), formatList(available), n)
			}
			take(i)
			coversNew(cands[i].t, reqs, covered)
		}
	}
	for i := range cands {
		if len(out) == n {
			break
		}
		if !picked[i] {
			take(i)
		}
	}
	if len(out) < n {
		return nil, exhausted(req, available, n)
	}
	return out, nil
}

// coversNew marks the requisite terms t serves and reports whether any of them
// was not yet covered.
func coversNew(t *csi.Topology, reqs []*csi.Topology, covered []bool) bool {
	fresh := false
	for i, r := range reqs {
		if Serves(t, r) {
			if !covered[i] {
				fresh = true
			}
			covered[i] = true
		}
	}
	return fresh
}

// termOrder lists requisite indexes with preferred terms first, in their order.
func termOrder(req *csi.TopologyRequirement) []int {
	reqs := req.GetRequisite()
	order := make([]int, 0, len(reqs))
	for _, p := range req.GetPreferred() {
		i := slices.IndexFunc(reqs, func(r *csi.Topology) bool { return maps.Equal(r.GetSegments(), p.GetSegments()) })
		if i >= 0 && !slices.Contains(order, i) {
			order = append(order, i)
		}
	}
	for i := range reqs {
		if !slices.Contains(order, i) {
			order = append(order, i)
		}
	}
	return order
}

func exhausted(req *csi.TopologyRequirement, available []*csi.Topology, n int) error {
	return status.Errorf(codes.ResourceExhausted,
		"accessibility_requirements (requisite %s, preferred %s): got %s from the backend, want %d segment(s) satisfying the requirement",
		formatList(req.GetRequisite()), formatList(req.GetPreferred()), formatList(available), n)
}

// canon is a topology's identity: its segments, sorted, each key and value
// followed by NUL (which valid keys and values cannot contain).
func canon(t *csi.Topology) string {
	seg := t.GetSegments()
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(seg)) {
		sb.WriteString(k)
		sb.WriteByte(0)
		sb.WriteString(seg[k])
		sb.WriteByte(0)
	}
	return sb.String()
}

// format renders a topology as {k=v,...} with sorted keys.
func format(t *csi.Topology) string {
	seg := t.GetSegments()
	parts := make([]string, 0, len(seg))
	for _, k := range slices.Sorted(maps.Keys(seg)) {
		parts = append(parts, k+"="+seg[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// formatList renders at most 8 topologies, so messages stay bounded.
func formatList(ts []*csi.Topology) string {
	const max = 8
	parts := make([]string, 0, min(len(ts), max))
	for i, t := range ts {
		if i == max {
			parts = append(parts, fmt.Sprintf("... %d more", len(ts)-max))
			break
		}
		parts = append(parts, format(t))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

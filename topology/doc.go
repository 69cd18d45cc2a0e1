// Package topology implements the CSI spec's topology rules for drivers whose
// volumes are not reachable from every node.
//
// On the controller side, Select chooses the segments a new volume is made
// accessible from, given CreateVolume's accessibility_requirements and the
// segments the backend can serve: preferred terms in their order first,
// requisite terms as the bound, and the spec's three cases for how many
// segments a volume spans (fewer than, as many as, or more than the
// requisite terms). Rank returns the whole preference order for drivers that
// try segments one after another.
//
// On the node side, Node builds and validates the accessible topology a node
// reports in NodeGetInfo, and Accessible tells whether a volume's topology
// reaches a node.
//
// Invariants: a backend segment serves a requirement term when every segment
// key of the backend segment is present in the term with the same value (so
// equal topologies always match, and a coarser backend segment, e.g. a
// region, serves a finer term, e.g. a zone in it, but never the reverse).
// Returned *csi.Topology values are the caller's own available entries, in
// preference order, each at most once. Bad requirements are InvalidArgument,
// an unsatisfiable one is ResourceExhausted (the spec's code for "unable to
// provision in accessible_topology"); nothing here modifies its inputs.
package topology

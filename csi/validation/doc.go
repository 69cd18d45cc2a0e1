// Package validation rejects malformed CSI requests before a driver sees
// them.
//
// [Validate] looks the gRPC full method name up in a table that lists, for
// every RPC of the Identity, Controller, GroupController, Node and
// SnapshotMetadata services of CSI v1.14, the rules its request must obey:
// required IDs and names, required capabilities, capacity ranges, node
// paths, page sizes. [UnaryServerInterceptor] and [StreamServerInterceptor]
// apply the same table on any *grpc.Server; [Lookup] hands out one RPC's
// rule for callers that resolve it once (csikit.Server does).
// [ValidPluginName] is the spec's rule for plugin names.
//
// Invariants:
//
//   - Validate returns nil or a *status.Status error. A malformed request gets
//     codes.InvalidArgument, except a relative volume_path in
//     NodeGetVolumeStats and NodeExpandVolume, which gets codes.NotFound (no
//     volume can be published at a relative path; csi-sanity expects
//     NotFound there), and a NodePublishVolume without staging_target_path
//     on a driver that stages volumes, which gets codes.FailedPrecondition
//     as the spec's error table says (not for CSI ephemeral inline volumes,
//     which kubelet never stages), and a negative starting_offset of the
//     SnapshotMetadata RPCs, which gets codes.OutOfRange as their error
//     tables say. A request of the wrong Go type for its method is a
//     wiring bug and gets codes.Internal. Methods missing from the table
//     pass (nil).
//   - Every message has the form "<RPC>: <field> <problem>", for example
//     "CreateVolume: name is required" or
//     "NodePublishVolume: volume_capability.access_mode is required".
//   - Messages never contain a string of the request: no secrets, no mount
//     flags, no IDs, names or paths — only field names, sizes, integers
//     (capacities, page sizes), enum names and the code point of a banned
//     character.
//   - The success path does not allocate; the table is built once and never
//     changes, so Validate is safe for concurrent use.
//   - IDs and names are capped by the spec's general 128-byte limit (node IDs
//     256 bytes) and may not contain NUL; names may not contain the control
//     characters the spec bans. Node paths (target_path,
//     staging_target_path, volume_path) have no length cap; they must be
//     absolute and contain no ".." element.
//   - ValidateVolumeCapabilities only checks that fields are present: an
//     unsupported capability is answered by the driver with an empty
//     "confirmed", which [Confirm] builds.
//
// Where csi-sanity and the spec text disagree, this package follows
// csi-sanity so conforming drivers pass it: the snapshot_ids of
// Get/DeleteVolumeGroupSnapshot and the mutable_parameters of
// ControllerModifyVolume are not required.
package validation

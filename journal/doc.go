// Package journal keeps the name → ID bindings that make CSI create calls
// idempotent, and the driver metadata that goes with them.
//
// A Journal binds a CO's name to a driver-chosen ID together with a
// Fingerprint of the request, durably, before the backend is touched, and
// records the response once the create succeeds. csikit's idempotency
// interceptor drives it: a create call goes
//
//  1. reserve: the journal binds the request's name to a new ID (RandomID
//     by default) with the request's fingerprint. If the name is already
//     bound with the same fingerprint the existing ID is reused; with a
//     different fingerprint the call fails with codes.AlreadyExists.
//  2. create: the driver reads the ID with ReservedID(ctx) and creates its
//     backend object under it. If it does so idempotently (creating an
//     object that exists is a no-op), it needs no journal code of its own.
//  3. commit: on success the response is recorded. A later retry with the
//     same name and fingerprint gets that response without calling the
//     driver (snapshots not yet ready to use call the driver again, so the
//     CO's polling sees them become ready).
//
// A retry after a crash, between reserve and commit, finds the reservation
// and passes the same ID to the driver, so no second object is made. (A
// File can instead hold chosen kinds' reservations in memory until their
// commit, FileOptions.Volatile: one flush per create, and a driver that
// removes at start what no record names.) A
// delete releases the binding after the driver succeeds. Kind.NameKey and
// Kind.IDKey are the lock keys (package locks) of a kind's names and IDs,
// which a create and a delete of the same object both take.
//
// Two stores implement Journal: Memory (tests; lost on exit) and File (a
// checksummed append-only log with group commit: one flush per batch of
// concurrent changes, crash-safe, for single-node drivers). A File's KV
// spaces let such a driver keep its own metadata in the same file, sharing
// the group commit: KV.DeferPut folds a create or delete call's metadata
// write into the journal's own commit or release (the call is a Call,
// which the interceptor starts with WithCall), and KV.Get reads a value, a
// call's own deferred writes included, so a driver needs no copy of its
// metadata in memory. KV lives here, not in a package of its own, because
// it is the File's file and transactions: its deferred writes are taken by
// File.Commit and File.Release. A File whose file failed a write reports
// it through HealthReporter (csikit's Server then answers Probe
// FailedPrecondition) and recovers on a later write or a reopen; the size
// limits are MaxKVValue, MaxDeferred and MaxKeyLen. Distributed drivers
// implement Journal on their backend (for example Ceph omap); Request(ctx)
// gives every Journal method the request it serves, so such a journal can
// live in the pool the request names and open it with the request's
// secrets.
//
// Sweep releases the reservations of creates the CO stopped retrying,
// after the driver's Clean removed what they left behind, holding the same
// name and ID locks a retry would.
//
// Names, IDs and paths are opaque: compared, hashed, stored as keys inside
// the journal file and printed quoted; never file names, never passed to a
// shell. Secrets are neither fingerprinted nor logged. Every error carries
// a gRPC status code.
package journal

// Package idempotency makes concurrent and retried CSI calls safe: keyed
// try-locks that answer Aborted, operation locks between a snapshot and its
// source, and a crash-safe name → ID journal that turns CreateVolume and
// CreateSnapshot retries into the same object, applied by one gRPC
// interceptor.
//
// # Locks
//
// Every mutating RPC takes try-locks on the keys DefaultKeys names for it
// (CreateVolume the name, DeleteVolume and the publish, stage, expand and
// modify calls the volume ID, node publish calls also the target path,
// CreateSnapshot the snapshot name, ...). A key that is held makes the call
// fail at once with codes.Aborted and a message naming the RPC holding it
// and for how long, for example:
//
//	volume "vol-1" is busy: /csi.v1.Controller/DeleteVolume has held it for 1.5s; retry later
//
// Operation locks are Shared locks on a source: CreateSnapshot and cloning
// CreateVolume hold their source volume Shared, so DeleteVolume and
// ControllerExpandVolume of that volume (which take it Exclusive) are
// Aborted until they finish; restoring a volume from a snapshot blocks
// DeleteSnapshot of it likewise. Options.Keys overrides the keys per RPC.
//
// # The journal
//
// With a Journal, a create call goes:
//
//  1. reserve: the journal binds the request's name to a new ID (from
//     Options.NewID) together with a Fingerprint of the request, durably,
//     before the backend is touched. If the name is already bound with the
//     same fingerprint the existing ID is reused; with a different
//     fingerprint the call fails with codes.AlreadyExists.
//  2. create: the driver reads the ID with ReservedID(ctx) and creates its
//     backend object under it. If it does so idempotently (creating an
//     object that exists is a no-op), it needs no journal code of its own.
//  3. commit: on success the response is recorded. A later retry with the
//     same name and fingerprint gets that response without calling the
//     driver (snapshots not yet ready to use call the driver again, so the
//     CO's polling sees them become ready).
//
// A retry while the first call still runs is Aborted by the name lock; the
// CO retries later and gets the committed answer. A retry after a crash,
// between reserve and commit, finds the reservation and passes the same ID
// to the driver, so no second object is made. Once the name ↔ ID binding
// exists, CreateVolume also locks the ID and DeleteVolume also locks the
// name, so the two exclude each other. DeleteVolume and DeleteSnapshot
// release the binding after the driver succeeds. A create refused with
// InvalidArgument, OutOfRange, AlreadyExists, Unimplemented or NotFound (a
// content source that does not exist) drops the reservation it made itself; a reservation from an earlier attempt, which
// may have built the object, stays, as it does after other errors, for
// the retry or Sweep.
//
// Two stores implement Journal: MemoryJournal (tests; lost on exit) and
// FileJournal (a checksummed append-only log with group commit: one
// flush per batch of concurrent changes, crash-safe, for single-node
// drivers; its KV spaces let such a driver keep its own metadata in the
// same file, sharing the group commit, and KV.DeferPut folds a create or
// delete call's metadata write into the journal's own commit or release;
// KV.Get reads a value, a call's own deferred writes included, so a driver
// needs no copy of its metadata in memory). A FileJournal whose file
// failed a write reports it through HealthReporter (csikit's Server then
// answers Probe FailedPrecondition) and recovers on a later write or a
// reopen; the size limits are MaxKVValue, MaxDeferred and MaxKeyLen.
// Distributed drivers implement Journal on their backend (for example Ceph
// omap); Request(ctx) gives every Journal method the request it serves, so
// such a journal can live in the pool the request names and open it with
// the request's secrets.
//
// Sweep releases the reservations of creates the CO stopped retrying,
// after the driver's Clean removed what they left behind.
//
// # Invariants
//
//   - Locks are released on every return path, including panics (which
//     propagate to the recovery interceptor) and context cancellation; the
//     lock table holds exactly the keys held now.
//   - Try-locks never wait, so locks cannot deadlock.
//   - Names, IDs and paths are opaque: compared, hashed, stored as keys
//     inside the journal file and printed quoted; never file names, never
//     passed to a shell. Secrets are neither fingerprinted nor logged.
//   - Every error carries a gRPC status code.
//
// Install the interceptor after request validation (which rejects empty and
// oversized names and IDs) and right before the driver. LockStats exposes the
// number of held keys and the oldest hold's age for metrics.
package idempotency

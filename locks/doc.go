// Package locks is keyed try-locks for CSI calls: a Table of keys held
// Exclusive or Shared that never waits, a Set that takes a call's locks all
// or none, and the key functions (KeyFunc) that say which keys each RPC
// holds.
//
// A key that is held makes the call fail at once with codes.Aborted and a
// message naming the RPC holding it and for how long, for example:
//
//	volume "vol-1" is busy: /csi.v1.Controller/DeleteVolume has held it for 1.5s; retry later
//
// The key functions: CreateVolumeKeys locks the name, the calls on a
// volume (publish, stage, expand, modify) its ID (VolumeIDKeys), node
// publish calls also the target path (NodePublishKeys), CreateSnapshotKeys
// the snapshot name, and so on. Operation locks are Shared locks on a
// source: CreateSnapshot and cloning CreateVolume hold their source volume
// Shared, so DeleteVolume and ControllerExpandVolume of that volume (which
// take it Exclusive) are Aborted until they finish; restoring a volume from
// a snapshot, or reading its metadata, blocks DeleteSnapshot of it
// likewise. Which RPC holds which keys is said by csikit's RPC table
// (csikit.LockKeys); Options.LockKeys of a csikit server overrides it.
//
// Invariants: a Set releases every lock on every return path of its
// owner; the table holds exactly the keys held now (Stats counts them for
// metrics); try-locks never wait, so locks cannot deadlock; keys are
// opaque, compared, hashed and printed quoted, never interpreted.
package locks

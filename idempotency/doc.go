// Package idempotency is the gRPC interceptor that makes concurrent and
// retried CSI calls safe by composing the two packages it is named for
// the effect of: package locks (every call takes the try-locks its RPC's
// KeyFunc names, Aborted naming the holder on a conflict) and package
// journal (CreateVolume, CreateSnapshot and CreateVolumeGroupSnapshot
// reserve name → ID before the driver runs, commit its answer after; the
// deletes release it).
//
// A call goes: its locks (Options.Keys, by full method name); for a create,
// the journal's reservation, then the lock of the reserved ID, so a create
// and a delete of one object exclude each other; the driver, which reads
// the ID with journal.ReservedID; the commit, or, when the driver refused
// the request (InvalidArgument, OutOfRange, AlreadyExists, Unimplemented or
// NotFound), the release of a reservation this very call made (a
// reservation from an earlier attempt, which may have built the object,
// stays for the retry or journal.Sweep). A delete looks the ID up, locks
// its name, calls the driver and releases the binding after a success. The
// driver's deferred KV writes (journal.KV.DeferPut) are durable before the
// answer goes out. Streaming RPCs take their locks per received message
// (StreamServerInterceptor); the journal does not apply to them.
//
// Locks are released on every return path, including panics (which
// propagate to the recovery interceptor) and context cancellation. Every
// error carries a gRPC status code.
//
// csikit's Server installs the interceptor with its RPC table's lock keys
// (csikit.LockKeys); a server of one's own installs it after request
// validation (which rejects empty and oversized names and IDs) and right
// before the driver. Interceptor.Locks gives the lock table, for drivers
// that lock more by hand, for journal.Sweep and for metrics (Table.Stats).
package idempotency

package idempotency

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"

	"github.com/csikit/csikit/internal/logctx"
)

// Options configures New. The zero value gives per-volume locks with the
// default keys and no journal.
type Options struct {
	// Journal records name → ID reservations for CreateVolume,
	// CreateSnapshot and CreateVolumeGroupSnapshot. Nil means locks only:
	// no reservations, ReservedID reports false.
	Journal Journal
	// BaseKeys are the key functions Keys amends, by gRPC full method
	// name. Nil means DefaultKeys(); csikit.NewServer passes its RPC
	// table's.
	BaseKeys map[string]KeyFunc
	// Keys overrides the key function of an RPC, by gRPC full method name
	// (csi.Controller_CreateVolume_FullMethodName, ...). A nil value turns
	// locking off for that RPC; methods not listed keep BaseKeys.
	Keys map[string]KeyFunc
	// NewID returns a fresh volume ID for a reservation of name. It must be
	// unique per name; it is called for every create, even retries, and its
	// result discarded when the name is already reserved. Default: 32
	// random hex digits. Ceph-style drivers return "csi-vol-" + a UUID.
	NewID func(name string) string
	// NewSnapshotID is NewID for snapshots and group snapshots. Default:
	// NewID if set, else 32 random hex digits.
	NewSnapshotID func(name string) string
	// Fingerprint overrides the package's Fingerprint, for drivers that
	// accept retries whose requests differ in ways they tolerate.
	Fingerprint func(req any) ([]byte, bool)
	// Locks is the lock table to use; share one between interceptors to
	// make them exclude each other. Default: a new table.
	Locks *LockTable
	// Logger receives debug lines for conflicts and warnings for driver
	// misbehaviour (never request contents or secrets). Lines logged
	// during a call carry its request ID and method (see
	// csi/logging.FromContext); a nil Logger means the call's logger, and
	// discards outside a call.
	Logger *slog.Logger
}

// RandomID returns 32 random hex digits (128 bits), the default ID format:
// safe in URLs, paths and Kubernetes object names.
func RandomID(string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

func (o Options) withDefaults() Options {
	if o.NewID == nil {
		o.NewID = RandomID
	}
	if o.NewSnapshotID == nil {
		o.NewSnapshotID = o.NewID
	}
	if o.Fingerprint == nil {
		o.Fingerprint = Fingerprint
	}
	if o.Locks == nil {
		o.Locks = NewLockTable()
	}
	var base slog.Handler // nil: the call's logger
	if o.Logger != nil {
		base = o.Logger.Handler()
	}
	o.Logger = slog.New(logctx.NewHandler(base))
	return o
}

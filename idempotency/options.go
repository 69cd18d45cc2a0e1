package idempotency

import (
	"log/slog"

	"github.com/csikit/csikit/internal/logctx"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/locks"
)

// Options configures New. The zero value locks nothing and journals
// nothing; set Keys (csikit.LockKeys) and Journal.
type Options struct {
	// Journal records name → ID reservations for CreateVolume,
	// CreateSnapshot and CreateVolumeGroupSnapshot. Nil means locks only:
	// no reservations, ReservedID reports false.
	Journal journal.Journal
	// Keys is the key function of each RPC, by gRPC full method name
	// (csi.Controller_CreateVolume_FullMethodName, ...): the locks a call
	// holds while it runs. Methods not listed, or listed with a nil
	// function, take no lock. csikit.LockKeys returns those of csikit's
	// RPC table, which its Server uses.
	Keys map[string]locks.KeyFunc
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
	Locks *locks.Table
	// Logger receives debug lines for conflicts and warnings for driver
	// misbehaviour (never request contents or secrets). Lines logged
	// during a call carry its request ID and method (see
	// csi/logging.FromContext); a nil Logger means the call's logger, and
	// discards outside a call.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.NewID == nil {
		o.NewID = journal.RandomID
	}
	if o.NewSnapshotID == nil {
		o.NewSnapshotID = o.NewID
	}
	if o.Fingerprint == nil {
		o.Fingerprint = journal.Fingerprint
	}
	if o.Locks == nil {
		o.Locks = locks.NewTable()
	}
	var base slog.Handler // nil: the call's logger
	if o.Logger != nil {
		base = o.Logger.Handler()
	}
	o.Logger = slog.New(logctx.NewHandler(base))
	return o
}

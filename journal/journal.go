package journal

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/locks"
)

// Kind separates the name spaces of a journal: a volume and a snapshot may
// share a name.
type Kind uint8

// The kinds of object a journal records.
const (
	KindVolume Kind = iota + 1
	KindSnapshot
	KindGroupSnapshot
	// KindFence records the nodes a csikit.Server fenced off a volume
	// (csikit.Fencer): the name is the volume and node pair, a reserved
	// record means fencing started, a committed one that it finished,
	// and releasing the record lifts the fence. docs/fencing.md gives the
	// layout. A journal shared by such a server must accept this kind.
	KindFence
)

// lastKind is the highest Kind a journal of this package stores.
const lastKind = KindFence

// String returns "volume", "snapshot", "group snapshot" or "fence".
func (k Kind) String() string {
	switch k {
	case KindVolume:
		return "volume"
	case KindSnapshot:
		return "snapshot"
	case KindGroupSnapshot:
		return "group snapshot"
	case KindFence:
		return "fence"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k >= KindVolume && k <= lastKind }

// NameKey is the lock key of a CO's name of kind k (locks.SpaceVolumeName,
// …): the key the create call of that name holds, so a delete of the ID
// bound to it, or Sweep, excludes that create.
func (k Kind) NameKey(name string) locks.Key {
	return locks.Key{Space: kindSpaces[k][0], ID: name}
}

// IDKey is the lock key of an ID of kind k (locks.SpaceVolume, …), the key
// the calls on that object hold.
func (k Kind) IDKey(id string) locks.Key {
	return locks.Key{Space: kindSpaces[k][1], ID: id}
}

// kindSpaces are the lock key spaces of each kind's names and IDs.
var kindSpaces = map[Kind][2]string{
	KindVolume:        {locks.SpaceVolumeName, locks.SpaceVolume},
	KindSnapshot:      {locks.SpaceSnapshotName, locks.SpaceSnapshot},
	KindGroupSnapshot: {locks.SpaceGroupSnapshotName, locks.SpaceGroupSnapshot},
	// Fence records are written under their volume's lock
	// (locks.SpaceVolume) by csikit's Server; these keys are never taken.
	KindFence: {"fence name", "fence"},
}

// Reservation asks a journal to bind Name to an ID.
type Reservation struct {
	// Kind is what is being created (a volume, a snapshot, …); names of
	// different kinds never collide.
	Kind Kind
	// Name is the CO's name for the object (CreateVolumeRequest.Name).
	Name string
	// Fingerprint identifies the request's parameters (see Fingerprint).
	Fingerprint []byte
	// ID is the ID to bind if Name is not yet reserved. It is ignored if
	// Name is already reserved.
	ID string
}

// Record is what a journal knows about one name.
type Record struct {
	// Kind is the kind of object the name belongs to.
	Kind Kind
	// Name is the CO's name for the object.
	Name string
	// ID is the ID bound to Name.
	ID string
	// Fingerprint identifies the parameters of the request that reserved
	// Name; a retry with another fingerprint is AlreadyExists.
	Fingerprint []byte
	// Committed is true once the driver's create call succeeded.
	Committed bool
	// Response is the serialized successful response, set by Commit.
	Response []byte
	// Reserved is when the name was first reserved.
	Reserved time.Time
	// Fresh is set only in the record Reserve returns, when that very
	// call made the reservation (the name was not bound before). It is not
	// stored. The Interceptor drops a reservation after a refused create
	// only if it is fresh: one from an earlier attempt may stand for a
	// backend object that attempt built. A Journal that never sets it
	// keeps those reservations for Sweep.
	Fresh bool
}

// Journal maps CO-chosen names to driver-chosen IDs durably, so that a
// create call retried after a timeout or a crash gets the ID of its first
// attempt. All methods are safe for concurrent use. Errors carry gRPC codes.
type Journal interface {
	// Reserve binds r.Name to r.ID unless the name is already bound, and
	// returns the record now bound to the name, with Fresh set if this
	// call bound it. A name bound with a
	// different fingerprint fails with codes.AlreadyExists. An r.ID already
	// bound to another name fails with codes.Internal.
	Reserve(ctx context.Context, r Reservation) (Record, error)
	// Commit marks name as created, with the given ID (normally the
	// reserved one; a different one rebinds) and serialized response. A
	// name with no reservation fails with codes.FailedPrecondition.
	Commit(ctx context.Context, kind Kind, name, id string, response []byte) error
	// LookupName returns the record bound to name, if any.
	LookupName(ctx context.Context, kind Kind, name string) (Record, bool, error)
	// LookupID returns the record bound to id, if any.
	LookupID(ctx context.Context, kind Kind, id string) (Record, bool, error)
	// Release forgets id and its name. Releasing an unknown ID succeeds.
	Release(ctx context.Context, kind Kind, id string) error
}

// HealthReporter is implemented by journals that can become unable to
// write, such as File. While Err returns non-nil, csikit's Server
// answers Probe with that error (FailedPrecondition: the plugin is not
// healthy) and reports the journal unhealthy in its metrics.
type HealthReporter interface {
	// Err returns nil while the journal takes writes, else why it does
	// not, with a gRPC code.
	Err() error
}

func checkArgs(ctx context.Context, kind Kind, s string) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	if !kind.valid() {
		return status.Errorf(codes.InvalidArgument, "journal: unknown kind %d", uint8(kind))
	}
	if s == "" {
		return status.Error(codes.InvalidArgument, "journal: empty name or ID")
	}
	if len(s) > MaxKeyLen {
		return status.Errorf(codes.InvalidArgument, "journal: name or ID of %d bytes, want at most %d", len(s), MaxKeyLen)
	}
	return nil
}

// MaxKeyLen is the longest name or ID a journal accepts. The CSI spec asks
// plugins to accept 128 bytes; request validation normally rejects longer
// ones before they get here.
const MaxKeyLen = 4096

func checkReservation(ctx context.Context, r Reservation) error {
	if err := checkArgs(ctx, r.Kind, r.Name); err != nil {
		return err
	}
	if r.ID == "" {
		return status.Errorf(codes.InvalidArgument, "journal: reservation of %s %q has an empty ID", r.Kind, r.Name)
	}
	return nil
}

func mismatch(rec Record) error {
	return status.Errorf(codes.AlreadyExists,
		"%s name %q is already used by %s %q created with different parameters; use a new name or repeat the original request",
		rec.Kind, rec.Name, rec.Kind, rec.ID)
}

func idTaken(kind Kind, id, owner, name string) error {
	return status.Errorf(codes.Internal,
		"journal: %s ID %q for name %q is already bound to name %q; the driver's NewID must return distinct IDs for distinct names",
		kind, id, name, owner)
}

func noReservation(kind Kind, name string) error {
	return status.Errorf(codes.FailedPrecondition, "journal: %s name %q has no reservation to commit", kind, name)
}

// sameFingerprint compares fingerprints byte for byte.
func sameFingerprint(a, b []byte) bool { return bytes.Equal(a, b) }

package csikit

import "context"

// Fencer is implemented by a driver that can cut a node off a volume, so
// that a node which hung rather than died can never write to a volume
// published elsewhere since. A driver that implements it must also
// implement ControllerPublisher (NewServer refuses it otherwise).
//
// csikit calls it from ControllerUnpublishVolume, under the volume's lock:
// after the driver's own ControllerUnpublishVolume succeeds, Holds reports
// whether the node still has access; if it does, the node is recorded as
// fencing in Options.Journal, Fence runs, the node is recorded as fenced,
// and only then does the call answer OK. A Fence that fails makes the call
// fail with a retryable code; it never answers OK. See docs/fencing.md for
// the lifecycle against Kubernetes' non-graceful node shutdown.
type Fencer interface {
	// Holds reports whether nodeID may still write to volumeID (a
	// mapping, lock, watcher, or recorded client).
	Holds(ctx context.Context, volumeID, nodeID string) (bool, error)
	// Fence cuts nodeID off volumeID; after it returns nil no write from
	// nodeID can land. Idempotent.
	Fence(ctx context.Context, volumeID, nodeID string) error
	// Unfence lifts the fence once the node is back and clean.
	// Idempotent.
	Unfence(ctx context.Context, volumeID, nodeID string) error
}

// Package csikit is an SDK for writing Kubernetes CSI (Container Storage
// Interface) drivers.
//
// A driver implements only the CSI methods its backend supports, as small
// interfaces that keep the spec's own method signatures, and hands the value
// to NewServer. The server derives every Get*Capabilities answer from what
// the value implements plus Options, rejects malformed requests with the
// spec's codes before the driver runs, recovers panics, logs with request IDs
// and without secrets, serializes calls per volume, makes CreateVolume and
// CreateSnapshot retries idempotent, and drains in-flight calls on shutdown.
// A driver that can cut a node off a volume (Fencer) has it done at
// ControllerUnpublishVolume before the call answers OK, so a node that hung
// rather than died never writes to a volume published elsewhere
// (see the fencing guide in the docs directory).
//
// The spec-level pieces it is built from live under csi/ (csi/endpoint,
// csi/validation, csi/secrets, csi/requestid, csi/logging, csi/recovery)
// and can be used on any *grpc.Server; the per-volume locks are in locks,
// the name→ID journal (and the KV spaces drivers keep metadata in) in
// journal, with journal/journaltest the contract a driver's own journal is
// held to, and the interceptor composing them in idempotency. Node helpers
// live in mount (with the fake mount/mounttest), block, fstree and quota,
// and caps tells which Linux capabilities the process has (online growth
// needs one); command runs external tools (process-group kill, separate
// streams, secrets on stdin); crypt encrypts volumes at rest (LUKS2); NodeGetVolumeStats
// answers are built by stats, volume-health entries by health, and
// Prometheus metrics (the /metrics handler) by metrics. runner runs a
// driver's parts under one context (runner.NewDriver: the CSI server,
// kubelet registration, the sweep, and one HTTP server for /metrics and
// the named checks of /healthz and /readyz), capacity turns a
// CapacityRange into a size, topology selects accessible topology, the k8s
// packages (k8s/registration, k8s/keys, k8s/csidriver, k8s/testdriver) speak Kubernetes'
// conventions, csitest serves a driver in-process or runs its binary for its tests
// (csitest/vmtest runs the tests that need a stock kernel in a VM, and the
// command csitest/vmtest/vmrun runs any commands there), and
// sanity is the conformance harness (sanity/kube, a module of its own, runs
// it against a real control plane); the command cmd/csikit calls, checks
// and runs the harness against a driver in any language by its endpoint.
// ARCHITECTURE.md maps every package.
package csikit

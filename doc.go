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
//
// The spec-level pieces it is built from live under csi/ and can be used on
// any *grpc.Server; node helpers live in mount/ and block/, Prometheus and
// NodeGetVolumeStats helpers in metrics/, and the conformance harness in
// sanity/.
package csikit

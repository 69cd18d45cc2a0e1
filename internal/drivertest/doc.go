// Package drivertest builds the example drivers and runs them as
// processes of their own, each serving on a unix socket, so that a harness
// (csikit's sanity by Endpoint, upstream csi-sanity) tests them exactly as
// a CO meets them: through their main package, flags and socket, not
// through an in-process server.
//
// Invariants:
//
//   - Every process Start launches is stopped when the test ends (SIGTERM,
//     then SIGKILL after StopTimeout), and its socket directory removed.
//   - Start returns only once the socket accepts connections, or fails the
//     test with the driver's output.
//   - A process's stdout and stderr are kept whole (Log), for the harness's
//     secret scan and for failure messages.
//   - Only processes this package started are ever signalled, by PID.
//
// It is internal: the examples' tests and CI use it; vendors run their own
// binaries however their CI does.
package drivertest

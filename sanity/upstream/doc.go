// Package upstream runs the sanity harness against a CSI driver nobody
// here wrote — the upstream csi-driver-host-path, built from its module —
// and holds the harness to an expected list of failures, each one a bug of
// that driver. A harness that passes a known-buggy real driver clean has
// failed; one that fails it for anything not on the list has a false alarm
// or found a new bug. See README.md.
package upstream

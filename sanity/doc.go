// Package sanity is csikit's conformance harness for CSI drivers: plain
// `go test`, no Ginkgo, no globals.
//
// A vendor writes one test function:
//
//	func TestSanity(t *testing.T) {
//		sanity.Run(t, sanity.Driver(mydriver.New(cfg), csikit.Options{...}), sanity.Config{})
//	}
//
// Run serves the driver in-process through csikit on a real unix socket (or
// dials the Endpoint of a driver written in any language) and runs every
// case as a t.Run subtest named after the RPC and the rule it checks, e.g.
// Run/mount/Controller/CreateVolume/same_name_different_capacity. It covers
// every behaviour csi-sanity v5.6.0 checks (CHECKLIST.md maps each of its
// specs to our case) and what csi-sanity misses: concurrent retries, driver
// restarts, data written through published volumes, snapshot and clone
// contents, real filesystem growth, pagination exactness, secrets in logs,
// leaked mounts and goroutines, and, with Config.SplitBrain, whether a
// node frozen mid-write and unpublished can still write to the volume
// once another node uses it (SplitBrainConfig; the driver passes by
// fencing the node, csikit.Fencer).
//
// Invariants:
//
//   - A case that needs a capability the driver does not advertise skips
//     with the reason; a case never passes by doing nothing.
//   - Every call has a deadline (Config.CallTimeout, default 30 s): a hung
//     driver fails one case, not the run.
//   - A failing case reports the RPC, the request with every secret
//     stripped, the code and message received, and the rule broken: the
//     spec's text ("CSI v1.14 …"), or, where the spec says nothing,
//     what Kubernetes expects ("Kubernetes …").
//   - Every volume and snapshot a case creates is deleted, and every path it
//     publishes unpublished, when the case ends — also when it fails.
//   - Run creates its node paths under one base directory; at the end it
//     fails if any mount is left under it (and detaches those mounts so the
//     test process leaks nothing), and, for in-process targets, if
//     goroutines leaked.
//   - The package keeps no global state: runs in one process are
//     independent (but see Config.IgnoreGoroutines about parallel tests).
package sanity

// Package secrets removes secrets from CSI messages before they are logged.
//
// Which fields are secret is read from the messages' descriptors, never from
// per-message code: a field is secret if the CSI spec marks it with the
// csi_secret field option (csi.E_CsiSecret), or if it is a map<string,
// string> named "secrets" (a guard for protocol forks that forgot the
// option). Strip therefore covers requests and responses of every RPC,
// messages nested at any depth, repeated fields and maps of messages, and
// fields added by future spec versions once the spec module is updated.
//
// Invariants:
//
//   - Strip never modifies its argument. It returns the argument itself when
//     nothing needs removing, else a stripped deep copy.
//   - In the copy, every secret string (single, repeated, or map value) is
//     Marker, every secret bytes value is []byte(Marker), every secret
//     message is empty and any other secret scalar is cleared. Map keys are
//     kept, so a log shows which secrets arrived but none of their values.
//   - Unknown fields are dropped from the copy at every depth: they may be
//     secrets defined by a newer peer whose marking this binary cannot see.
//   - LogValue does no work until a log handler actually resolves the value,
//     so a disabled log level costs nothing beyond the call.
//
// The package keeps one process-wide cache of which field descriptors are
// secret; descriptors are immutable, so the cache never changes an answer.
package secrets

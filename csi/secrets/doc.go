// Package secrets removes secrets from CSI messages before they are logged,
// and from text and errors derived from them before they are logged or
// returned.
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
// # Secrets in text
//
// Redact (and Redactor, to redact several texts with the same messages)
// protects text derived from a request: an error a driver built, a panic
// value. It finds each secret value in every spelling that the escapers a
// driver, a log handler or a sidecar use can give it, and replaces the
// whole spelling with Marker. It matches one secret character at a time,
// each in any of these spellings:
//
//   - as is;
//   - a backslash escape as Go (strconv.Quote, QuoteToASCII, QuoteToGraphic,
//     %q, %+q, %#v, slog.TextHandler), JSON (encoding/json with and without
//     HTML escaping, protojson, slog.JSONHandler, ASCII-only encoders such
//     as Python's) and C or JavaScript write them: \n \r \t \b \f \v \a \"
//     \' \\ \/, \xHH (also per UTF-8 byte), \uHHHH (surrogate pairs above
//     U+FFFF), \UHHHHHHHH, and \ufffd or U+FFFD for a byte that is not
//     UTF-8; hex digits in either case;
//   - percent-encoding (net/url's QueryEscape, PathEscape and userinfo, hex
//     in either case) and '+' for a space: secrets end up in URLs and in
//     mount options built like query strings;
//   - any of these escaped again, up to Depth (2) rounds, so a %q-quoted
//     secret inside a JSON log line, or JSON inside a Go-quoted error, is
//     found too. Each character may use a different spelling.
//
// Letters, digits and "-._~" are never escaped by any of these, so they
// are matched as is: a secret made only of them costs one strings.Index,
// and any other secret is looked for only where its longest run of them
// occurs. Overlapping or adjacent matches of several secrets become one
// Marker, so no part of either is left. With up to 32 distinct secrets,
// matching is one pass over the text per secret; with more (a secrets map
// of thousands of entries), one pass finds every plain secret and the
// plain run of every other one at once (an Aho–Corasick automaton), and
// only the secrets whose run occurs get a pass of their own, so the time
// per text does not grow with the number of secrets. The work is bounded
// either way: a text that would exceed the bound (only crafted ones do,
// such as a secret of a hundred backslashes against kilobytes of them, or
// thousands of secrets whose runs all occur in the text, more than 4 MiB
// of passes) is replaced by Marker as a whole, never returned
// half-checked.
//
// Not covered, because no escaper produces it or it cannot be matched
// without false positives: base64, hex or hashes of a whole value (an HTTP
// Basic Authorization header), HTML entities, changed case, a value cut in
// parts or wrapped across lines, and secrets the driver read from anywhere
// but the request.
//
// Values shorter than MinLen (4) bytes are not searched for in text; Strip
// still removes them from messages. Replacing every "a" or "123" would
// destroy the log and, by the pattern of what was replaced, reveal the
// value anyway: such a value is not a secret a log can protect.
//
// RedactError applies the same to a returned error: its gRPC status
// message and every string in its details. UnaryServerInterceptor does it
// for every call, so what a driver returns never carries a secret of the
// request to the CO, whose sidecars copy error messages into Kubernetes
// Events.
//
// The package keeps one process-wide cache of which field descriptors are
// secret; descriptors are immutable, so the cache never changes an answer.
package secrets

// Package registration registers a CSI node plugin with kubelet directly,
// through kubelet's plugin-registration API (k8s.io/kubelet
// pkg/apis/pluginregistration/v1), so the node-driver-registrar sidecar
// becomes optional.
//
// Kubelet watches its plugins_registry directory (DefaultDir). A Registrar
// serves the pluginregistration.Registration service on a socket there,
// <driver-name>-reg.sock by default: kubelet dials it, calls GetInfo to learn
// the driver name, the CSI endpoint to use and the supported CSI versions,
// dials that endpoint (NodeGetInfo), and reports the outcome with
// NotifyRegistrationStatus. The Registrar logs that outcome and keeps it:
// Status returns it and Err is non-nil while kubelet reports a failure, so a
// driver's Probe or /healthz can fail and the plugin be restarted, as the
// sidecar does by exiting.
//
// Invariants:
//   - The socket lives at the configured path only while Serve runs; it is
//     removed on shutdown, and only if it is still the socket this Registrar
//     created (a successor's socket is never deleted).
//   - A stale socket (one nobody accepts connections on) is replaced; a live
//     one, or anything that is not a socket, is left alone and reported as
//     FailedPrecondition.
//   - The driver name is checked against the CSI name rules before it is
//     used in a path, so it cannot escape the registration directory.
//   - No global state: logging goes to Options.Logger (discarded when nil).
package registration

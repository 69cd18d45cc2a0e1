// Package health builds the volume-health answers of CSI: the condition
// entries of NodeGetVolumeStats and NodeGetVolumeHealth (a path missing,
// not mounted, its filesystem remounted read-only by the kernel, its device
// gone) and of ControllerGetVolumeHealth (the driver's backend checks),
// merged so a (status, reason) pair appears once, as the spec asks.
//
// Checks that touch a path are bounded by the caller's context, so a hung
// mount cannot hang the RPC. Errors are gRPC statuses. The path checks need
// Linux; elsewhere they build but answer Unimplemented.
package health

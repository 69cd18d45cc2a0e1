// Package metrics holds the observability helpers of a CSI driver: the
// NodeGetVolumeStats builders for filesystem and raw block volumes, the
// NodeGetVolumeHealth / ControllerGetVolumeHealth helpers, Prometheus
// collectors for gRPC operations and per-volume usage, and a small HTTP
// server for /metrics and /healthz.
//
// Invariants:
//
//   - No global state. Every collector is a prometheus.Collector the caller
//     registers on its own registry; nothing here touches
//     prometheus.DefaultRegisterer, flags or environment variables.
//   - The operations histogram keeps csi-lib-utils' name and labels,
//     csi_plugin_operations_seconds{driver_name,method_name,grpc_status_code},
//     with method_name the full gRPC method and codes by name ("OK",
//     "InvalidArgument", …), so existing dashboards work unchanged.
//   - Labels never carry request contents: only the driver name, the gRPC
//     method, the status code name and, for per-volume gauges, the volume
//     ID. Secrets cannot reach a label.
//   - VolumeStats never invents data: a block device is sized with
//     BLKGETSIZE64 (statfs on a device node would describe /dev), a missing
//     path is NotFound, and a path that is not a mount point is refused
//     (NotFound) unless the caller opts out, because statfs would describe
//     the filesystem underneath. Such conditions are what the health helpers
//     report.
//   - Filesystem calls that may hang (statfs on a dead network mount) are
//     bounded by the caller's context; a call whose context ends returns at
//     once and its goroutine exits when the kernel returns.
//   - Errors carry gRPC codes (google.golang.org/grpc/status) and never
//     panic; invalid label values are dropped, not panicked on.
//
// The volume and health helpers need Linux; on other systems they build but
// answer Unimplemented.
package metrics

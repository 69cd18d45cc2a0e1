// Package metrics holds the observability of a CSI driver: Prometheus
// collectors for gRPC operations (and the interceptors feeding them) and
// for per-volume usage, and the /metrics handler. The answers of
// NodeGetVolumeStats and the volume-health RPCs are built by packages stats
// and health; a driver's HTTP server with /healthz and /readyz is runner's.
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
//   - Per-volume reads are bounded: a volume whose filesystem hangs is
//     reported as not up and read again only once the kernel returns.
//   - Errors carry gRPC codes (google.golang.org/grpc/status) and never
//     panic; invalid label values are dropped, not panicked on.
package metrics

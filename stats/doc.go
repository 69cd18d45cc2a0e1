// Package stats answers NodeGetVolumeStats: the usage of a staged or
// published volume, told apart as a filesystem or a raw block volume.
//
// Invariants:
//
//   - It never invents data: a block device is sized with BLKGETSIZE64
//     (statfs on a device node would describe /dev), a missing path is
//     NotFound, and a path that is not a mount point is refused (NotFound)
//     unless Config.AllowUnmounted says the driver's volumes are plain
//     directories, because statfs would describe the filesystem underneath.
//     Such conditions are what package health reports.
//   - Calls that may hang (statfs on a dead network mount) are bounded by
//     the caller's context; a call whose context ends returns at once and
//     its goroutine exits when the kernel returns.
//   - Errors are gRPC statuses with the spec's codes; nothing panics.
//
// It needs Linux; elsewhere it builds but answers Unimplemented.
package stats

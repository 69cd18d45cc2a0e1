package health

import (
	"context"
	"strings"

	"github.com/csikit/csikit/internal/pathstat"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Check is a set of the conditions Path looks for.
type Check uint

// The conditions Path detects, with the entry each one reports.
const (
	// CheckExists reports INACCESSIBLE "PathMissing" when the path does not
	// exist and INACCESSIBLE "PathError" when it or its filesystem cannot
	// be examined (EIO from a shut-down filesystem, a dead FUSE daemon's
	// ENOTCONN, a stale NFS handle, …).
	CheckExists Check = 1 << iota
	// CheckMounted reports INACCESSIBLE "NotMounted" when a directory is
	// not a mount point, or when a regular file has no device bound on it.
	CheckMounted
	// CheckWritable reports DEGRADED "FilesystemReadOnly" when the kernel
	// made the filesystem read-only under a read-write mount: its
	// errors=remount-ro reaction to corruption or I/O errors (superblock
	// "ro", or ext4's "emergency_ro"). A volume mounted read-only on
	// purpose is not reported. Costs one read of /proc/self/mountinfo.
	CheckWritable
	// CheckDevice reports INACCESSIBLE "DeviceGone" when the block device
	// behind the path (the device node of a raw block volume, or the device
	// a filesystem is mounted from) no longer exists or has size 0.
	CheckDevice

	// AllChecks is every condition above.
	AllChecks = CheckExists | CheckMounted | CheckWritable | CheckDevice
)

// Health entry reasons reported by Path: CamelCase, as the spec asks.
const (
	ReasonPathMissing        = "PathMissing"
	ReasonPathError          = "PathError"
	ReasonNotMounted         = "NotMounted"
	ReasonFilesystemReadOnly = "FilesystemReadOnly"
	ReasonDeviceGone         = "DeviceGone"
)

// Options configures NodeVolume. The zero value runs every
// check of AllChecks.
type Options struct {
	// Skip removes checks that do not fit the driver, e.g. CheckMounted
	// for hostpath-style volumes that are plain directories.
	Skip Check

	// Check, when set, adds the driver's own conditions (backend state,
	// replication, …) after the path checks. A gRPC status error from it is
	// returned as is: NotFound is how the driver says it does not know the
	// volume, as the spec asks.
	Check func(ctx context.Context, volumeID string) ([]*csi.VolumeHealth_VolumeHealthEntry, error)
}

// NodeVolume answers NodeGetVolumeHealth (spec v1.13+): it checks the
// staging and publish paths the request names (each when non-empty), then
// Options.Check, and returns the entries found, merged so no
// (status, reason) pair repeats. An empty list means no adverse condition
// is known. An empty volume_id or a relative path is InvalidArgument; the
// context's end returns its code.
func NodeVolume(ctx context.Context, req *csi.NodeGetVolumeHealthRequest, opts Options) (*csi.NodeGetVolumeHealthResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is empty")
	}
	checks := AllChecks &^ opts.Skip
	var entries []*csi.VolumeHealth_VolumeHealthEntry
	for _, p := range []struct{ field, path string }{
		{"staging_target_path", req.GetStagingTargetPath()},
		{"volume_publish_path", req.GetVolumePublishPath()},
	} {
		if p.path == "" {
			continue
		}
		clean, err := pathstat.CleanPath(p.field, p.path)
		if err != nil {
			return nil, err
		}
		found, err := Path(ctx, clean, checks)
		if err != nil {
			return nil, err
		}
		for _, e := range found {
			e.Message = p.field + " " + e.Message
		}
		entries = append(entries, found...)
	}
	if opts.Check != nil {
		found, err := opts.Check(ctx, req.GetVolumeId())
		if err != nil {
			return nil, err
		}
		entries = append(entries, found...)
	}
	return &csi.NodeGetVolumeHealthResponse{VolumeHealth: New(req.GetVolumeId(), entries...)}, nil
}

// Path examines one staged or published path for the conditions in
// checks and returns one entry per condition found (nil when healthy). The
// path must be absolute. It is bounded by ctx: a path whose filesystem
// hangs returns the context's status.
func Path(ctx context.Context, path string, checks Check) ([]*csi.VolumeHealth_VolumeHealthEntry, error) {
	clean, err := pathstat.CleanPath("path", path)
	if err != nil {
		return nil, err
	}
	return pathstat.Bounded(ctx, func() ([]*csi.VolumeHealth_VolumeHealthEntry, error) {
		entries, err := pathHealth(clean, checks)
		if _, ok := status.FromError(err); !ok {
			err = status.Errorf(codes.Internal, "volume health of %q: %v", clean, err)
		}
		return entries, err
	})
}

// ControllerVolume answers ControllerGetVolumeHealth (spec v1.13+):
// it validates the request, asks check for the volume's conditions and
// returns them merged as New does. check returns a NotFound
// status for a volume it does not know; its errors are returned as is.
// Secrets in the request are passed to nobody but check's closure.
func ControllerVolume(ctx context.Context, req *csi.ControllerGetVolumeHealthRequest, check func(ctx context.Context, volumeID string) ([]*csi.VolumeHealth_VolumeHealthEntry, error)) (*csi.ControllerGetVolumeHealthResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id is empty")
	}
	if check == nil {
		return nil, status.Error(codes.Unimplemented, "ControllerVolume: no check function configured")
	}
	entries, err := check(ctx, req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	return &csi.ControllerGetVolumeHealthResponse{VolumeHealth: New(req.GetVolumeId(), entries...)}, nil
}

// New builds a VolumeHealth for volumeID from entries, keeping
// the spec's rule that a (status, reason) pair appears at most once: the
// messages of repeated pairs are joined with "; " in order. Nil entries
// are dropped. The result's HealthStatuses is empty, not nil-checked by
// callers, when there is nothing to report.
func New(volumeID string, entries ...*csi.VolumeHealth_VolumeHealthEntry) *csi.VolumeHealth {
	type key struct {
		s csi.VolumeHealthErrorType
		r string
	}
	var out []*csi.VolumeHealth_VolumeHealthEntry
	seen := map[key]*csi.VolumeHealth_VolumeHealthEntry{}
	for _, e := range entries {
		if e == nil {
			continue
		}
		k := key{e.GetStatus(), e.GetReason()}
		if prev, ok := seen[k]; ok {
			if m := e.GetMessage(); m != "" && !strings.Contains(prev.Message, m) {
				prev.Message = strings.TrimPrefix(prev.Message+"; "+m, "; ")
			}
			continue
		}
		c := &csi.VolumeHealth_VolumeHealthEntry{Status: e.GetStatus(), Reason: e.GetReason(), Message: e.GetMessage()}
		seen[k] = c
		out = append(out, c)
	}
	return &csi.VolumeHealth{VolumeId: volumeID, HealthStatuses: out}
}

// Degraded returns a DEGRADED entry: the volume is usable but not
// operating optimally. reason is CamelCase, message is for humans.
func Degraded(reason, message string) *csi.VolumeHealth_VolumeHealthEntry {
	return &csi.VolumeHealth_VolumeHealthEntry{Status: csi.VolumeHealthErrorType_DEGRADED, Reason: reason, Message: message}
}

// Inaccessible returns an INACCESSIBLE entry: the volume cannot be used
// (from this node, when a node plugin reports it).
func Inaccessible(reason, message string) *csi.VolumeHealth_VolumeHealthEntry {
	return &csi.VolumeHealth_VolumeHealthEntry{Status: csi.VolumeHealthErrorType_INACCESSIBLE, Reason: reason, Message: message}
}

// DataLoss returns a DATA_LOSS entry: permanent data loss is known or
// strongly suspected.
func DataLoss(reason, message string) *csi.VolumeHealth_VolumeHealthEntry {
	return &csi.VolumeHealth_VolumeHealthEntry{Status: csi.VolumeHealthErrorType_DATA_LOSS, Reason: reason, Message: message}
}

package metrics

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/health"
	"github.com/csikit/csikit/stats"
)

// The NodeGetVolumeStats and volume-health builders moved to the packages
// named for them, stats and health; metrics keeps observability
// (interceptor, collectors, HTTP). These forwarders keep existing drivers
// building and will be removed in a later release.

// StatsConfig is stats.Config.
//
// Deprecated: use stats.Config.
type StatsConfig = stats.Config

// VolumeStats is stats.VolumeStats.
//
// Deprecated: use stats.VolumeStats.
func VolumeStats(ctx context.Context, path string) (*csi.NodeGetVolumeStatsResponse, error) {
	return stats.VolumeStats(ctx, path)
}

// HealthCheck is health.Check.
//
// Deprecated: use health.Check.
type HealthCheck = health.Check

// HealthOptions is health.Options.
//
// Deprecated: use health.Options.
type HealthOptions = health.Options

// Deprecated: use the constants of package health.
const (
	CheckExists              = health.CheckExists
	CheckMounted             = health.CheckMounted
	CheckWritable            = health.CheckWritable
	CheckDevice              = health.CheckDevice
	AllChecks                = health.AllChecks
	ReasonPathMissing        = health.ReasonPathMissing
	ReasonPathError          = health.ReasonPathError
	ReasonNotMounted         = health.ReasonNotMounted
	ReasonFilesystemReadOnly = health.ReasonFilesystemReadOnly
	ReasonDeviceGone         = health.ReasonDeviceGone
)

// NodeVolumeHealth is health.NodeVolume.
//
// Deprecated: use health.NodeVolume.
func NodeVolumeHealth(ctx context.Context, req *csi.NodeGetVolumeHealthRequest, opts HealthOptions) (*csi.NodeGetVolumeHealthResponse, error) {
	return health.NodeVolume(ctx, req, opts)
}

// PathHealth is health.Path.
//
// Deprecated: use health.Path.
func PathHealth(ctx context.Context, path string, checks HealthCheck) ([]*csi.VolumeHealth_VolumeHealthEntry, error) {
	return health.Path(ctx, path, checks)
}

// ControllerVolumeHealth is health.ControllerVolume.
//
// Deprecated: use health.ControllerVolume.
func ControllerVolumeHealth(ctx context.Context, req *csi.ControllerGetVolumeHealthRequest, check func(ctx context.Context, volumeID string) ([]*csi.VolumeHealth_VolumeHealthEntry, error)) (*csi.ControllerGetVolumeHealthResponse, error) {
	return health.ControllerVolume(ctx, req, check)
}

// NewVolumeHealth is health.New.
//
// Deprecated: use health.New.
func NewVolumeHealth(volumeID string, entries ...*csi.VolumeHealth_VolumeHealthEntry) *csi.VolumeHealth {
	return health.New(volumeID, entries...)
}

// Degraded is health.Degraded.
//
// Deprecated: use health.Degraded.
func Degraded(reason, message string) *csi.VolumeHealth_VolumeHealthEntry {
	return health.Degraded(reason, message)
}

// Inaccessible is health.Inaccessible.
//
// Deprecated: use health.Inaccessible.
func Inaccessible(reason, message string) *csi.VolumeHealth_VolumeHealthEntry {
	return health.Inaccessible(reason, message)
}

// DataLoss is health.DataLoss.
//
// Deprecated: use health.DataLoss.
func DataLoss(reason, message string) *csi.VolumeHealth_VolumeHealthEntry {
	return health.DataLoss(reason, message)
}

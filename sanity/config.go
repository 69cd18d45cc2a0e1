package sanity

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// AccessType selects the volume access types the cases use.
type AccessType uint8

// Access types. Both runs every volume case once per type, as subtests
// named "mount" and "block".
const (
	// MountAccess uses VolumeCapability_Mount (the default).
	MountAccess AccessType = 1 << iota
	// BlockAccess uses VolumeCapability_Block.
	BlockAccess
	// BothAccess runs the cases in both access types.
	BothAccess = MountAccess | BlockAccess
)

// Area is a set of case groups. Config.Areas selects which run.
type Area uint32

// Areas. The zero Config.Areas means AllAreas. An area also skips itself,
// with the reason, when the driver does not advertise what it needs.
const (
	// Identity: GetPluginInfo, GetPluginCapabilities, Probe.
	Identity Area = 1 << iota
	// Controller: Create/Delete/Validate/List volumes, capacity, controller
	// publish, attach limits.
	Controller
	// Snapshots: Create/Delete/List snapshots, restore.
	Snapshots
	// Expansion: controller and node expansion.
	Expansion
	// Modify: ControllerModifyVolume.
	Modify
	// Node: node service RPCs and the volume lifecycle.
	Node
	// GroupController: volume group snapshots.
	GroupController
	// DataPath: data written through published volumes survives
	// republish, snapshots, clones; expansion is seen on the node.
	DataPath
	// Concurrency: concurrent retries and racing calls on one volume.
	Concurrency
	// Restart: retries after the driver restarts (needs a restart hook).
	Restart
	// Pagination: ListVolumes and ListSnapshots page exactness.
	Pagination
	// SecretLogs: no secret value reaches the driver's log.
	SecretLogs
	// Hygiene: no mounts left under the test paths, no backend objects
	// left after the run (with Config.BackendObjects), no leaked
	// goroutines.
	Hygiene
	// SnapshotMetadata: GetMetadataAllocated and GetMetadataDelta on block
	// volumes (ranges valid, sorted, inside the volume; starting_offset and
	// max_results honoured; writes show up at their offsets).
	SnapshotMetadata
	// Encryption: data written through a volume is not in the backend's
	// raw data in plaintext; a wrong passphrase is refused and changes
	// nothing (runs only with Config.Encryption).
	Encryption
	// SplitBrain: a node that hangs while it writes, is unpublished and
	// wakes up after the volume was published to another node never
	// writes to it again (fencing): needs ControllerPublishVolume, a
	// second node plugin and Config.SplitBrain; mount access type only.
	SplitBrain

	// AllAreas is every area.
	AllAreas Area = 1<<iota - 1
)

// Defaults used for the zero values of Config.
const (
	DefaultCallTimeout     = 30 * time.Second
	DefaultVolumeSize      = 32 << 20
	DefaultIdempotentCount = 3
	DefaultConcurrency     = 8
)

// Config tunes a Run. Every field has a documented default; the zero
// Config runs every area in mount access type.
type Config struct {
	// AccessType is the access type the volume cases use (default
	// MountAccess).
	AccessType AccessType
	// Areas selects the case groups to run (default AllAreas).
	Areas Area
	// FsType is the fs_type of mount capabilities ("" lets the driver
	// choose).
	FsType string

	// VolumeSize is the capacity requested for test volumes (default 32
	// MiB).
	VolumeSize int64
	// ExpandSize is the capacity expansion cases ask for (default twice
	// VolumeSize).
	ExpandSize int64
	// Parameters are the CreateVolume parameters.
	Parameters map[string]string
	// SnapshotParameters are the CreateSnapshot parameters.
	SnapshotParameters map[string]string
	// MutableParameters are the ControllerModifyVolume parameters the
	// driver accepts; the modify cases that need them skip without.
	MutableParameters map[string]string
	// Secrets is passed in every request's secrets field. Default:
	// DefaultSecrets(), random values with quotes, backslashes, a newline
	// and non-ASCII letters, so the SecretLogs area always has secrets to
	// look for, also in their escaped forms. Drivers that need real
	// credentials set them here (and may add DefaultSecrets' entries).
	Secrets map[string]string
	// Encryption turns on the Encryption area for a driver whose volumes
	// (with Parameters and Secrets) are encrypted at rest; nil leaves it
	// out.
	Encryption *EncryptionConfig
	// SplitBrain turns on the SplitBrain area: the second node plugin,
	// how to freeze node A's data path, how to check the filesystem; nil
	// leaves it out.
	SplitBrain *SplitBrainConfig
	// UnsupportedAccessModes are access modes the driver does not serve;
	// CreateVolume with them must fail with InvalidArgument. The
	// single-node-multi-writer modes are added automatically when the
	// driver does not advertise SINGLE_NODE_MULTI_WRITER.
	UnsupportedAccessModes []csi.VolumeCapability_AccessMode_Mode

	// CallTimeout bounds every RPC (default 30 s).
	CallTimeout time.Duration
	// IdempotentCount is how often idempotency cases repeat a call
	// (default 3).
	IdempotentCount int
	// Concurrency is the number of goroutines of the concurrency cases
	// (default 8).
	Concurrency int
	// TestAttachLimit publishes volumes up to NodeGetInfo's
	// max_volumes_per_node and expects the next ControllerPublishVolume to
	// fail (off by default, as in csi-sanity).
	TestAttachLimit bool

	// BaseDir is where staging and target paths are created (default a
	// t.TempDir). For a driver in a container, use a directory both the
	// test and the driver see under the same path. It must hold no mounts
	// of its own: Hygiene fails on any mount left below it.
	BaseDir string
	// NodeFS performs the harness's own file operations on node paths
	// (default: this process's filesystem). Replace it for drivers whose
	// node paths live elsewhere, e.g. in a container.
	NodeFS NodeFS

	// Restart kills the driver and starts it again on the same state, and
	// returns once it serves again. Needed by the Restart area for
	// Endpoint targets; in-process targets built with Restartable restart
	// without it.
	Restart func(ctx context.Context) error
	// Log returns everything the driver has logged so far; the SecretLogs
	// area searches it for secret values. In-process targets whose
	// Options.Logger is nil get a debug-level log captured by the harness.
	Log func() ([]byte, error)
	// Skip skips cases, each with the reason reported: keys are case paths
	// relative to the Run test (e.g.
	// "mount/Expansion/NodeExpandVolume/after_publish"), or prefixes ending
	// in "/" (e.g. "block/Restart/"). For known limits of a test
	// environment, not for hiding driver bugs.
	Skip map[string]string
	// BackendObjects returns the objects that exist in the driver's backend
	// now, one string naming each: an LV, an image, a snapshot, a trash
	// entry, a journal record, a file under the state directory. Leave out
	// what the driver keeps whatever the volumes (its journal file, a lock).
	// The harness calls it before each case (and each group of cases) and
	// again after the case's cleanup has deleted what the case created, and
	// fails the case naming every object that appeared and stayed. Objects
	// that existed before the case are ignored, so volumes a group shares
	// with its cases are checked when the group ends, and each leaked object
	// is reported once, by the innermost case that left it. Hygiene's
	// no_backend_objects_left then fails for objects left outside any case
	// (the end of the run against its start, after the driver started).
	// Nil (the default) checks nothing. Each call gets CallTimeout. Objects
	// other users of the same backend create during the run are blamed on a
	// case: give the run a backend (pool, volume group, directory) of its
	// own.
	BackendObjects func(ctx context.Context) ([]string, error)
	// IgnoreGoroutines names functions (as goleak.IgnoreTopFunction takes
	// them) whose goroutines may outlive an in-process driver. The Hygiene
	// area fails the run when any other goroutine started during it still
	// runs after the driver stops; tests running in parallel with Run start
	// goroutines of their own, so drop Hygiene from Areas there.
	IgnoreGoroutines []string
}

func (c Config) withDefaults() Config {
	if c.AccessType == 0 {
		c.AccessType = MountAccess
	}
	if c.Areas == 0 {
		c.Areas = AllAreas
	}
	if c.VolumeSize <= 0 {
		c.VolumeSize = DefaultVolumeSize
	}
	if c.ExpandSize <= 0 {
		c.ExpandSize = 2 * c.VolumeSize
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.IdempotentCount <= 0 {
		c.IdempotentCount = DefaultIdempotentCount
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.NodeFS == nil {
		c.NodeFS = LocalFS{}
	}
	if c.Secrets == nil {
		c.Secrets = DefaultSecrets()
	}
	return c
}

// DefaultSecrets returns the secrets a Config without Secrets sends: one
// plain random value and one random value with double quotes, backslashes,
// a newline and non-ASCII letters, which loggers and error formatting
// escape (Go %q, JSON), so SecretLogs looks for those forms too.
func DefaultSecrets() map[string]string {
	return map[string]string{
		"sanity-secret":         "sanity-secret-" + randomHex(12),
		"sanity-secret-escaped": `sanity "quoted" C:\secret\` + "\nline two: ünïcødé ✓ " + randomHex(12),
	}
}

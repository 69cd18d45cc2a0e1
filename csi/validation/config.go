package validation

import "github.com/container-storage-interface/spec/lib/go/csi"

// AccessType is a set of volume access types: [Mount], [Block] or both.
type AccessType uint8

const (
	// Mount is the filesystem access type (VolumeCapability.mount).
	Mount AccessType = 1 << iota
	// Block is the raw block access type (VolumeCapability.block).
	Block
)

// String returns "mount", "block", "mount|block" or "none".
func (t AccessType) String() string {
	switch t & (Mount | Block) {
	case Mount:
		return "mount"
	case Block:
		return "block"
	case Mount | Block:
		return "mount|block"
	}
	return "none"
}

// ContentSources says which kinds of volume_content_source CreateVolume may
// name. The zero value allows none.
type ContentSources struct {
	// Snapshot allows creating a volume from a snapshot.
	Snapshot bool
	// Volume allows cloning a volume.
	Volume bool
}

// Spec limits used when the corresponding Config field is zero.
const (
	// DefaultMaxIDLength is the spec's general string limit, in bytes,
	// applied to volume, snapshot and group snapshot IDs.
	DefaultMaxIDLength = 128
	// DefaultMaxNameLength is the spec's general string limit, in bytes,
	// applied to CreateVolume, CreateSnapshot and CreateVolumeGroupSnapshot
	// names.
	DefaultMaxNameLength = 128
	// DefaultMaxNodeIDLength is the spec's node ID limit in bytes.
	DefaultMaxNodeIDLength = 256
	// MaxMountFlagsBytes is the spec's cap on the total size of
	// VolumeCapability.mount.mount_flags.
	MaxMountFlagsBytes = 4096
)

// Config says what the driver supports. The zero value is usable: both
// access types, every access mode of the spec, no content sources, the
// spec's length limits.
//
// Validate reads a Config and never changes it; do not change a Config while
// requests are being validated with it.
type Config struct {
	// AccessTypes lists the access types volumes may use. Zero means
	// Mount|Block.
	AccessTypes AccessType

	// AccessModes lists the access modes volumes may use. Empty means every
	// mode the spec defines except UNKNOWN.
	AccessModes []csi.VolumeCapability_AccessMode_Mode

	// ContentSources says which kinds of volume_content_source CreateVolume
	// may name.
	ContentSources ContentSources

	// StageUnstage makes staging_target_path required in
	// NodePublishVolume, as the spec demands of a node plugin that has the
	// STAGE_UNSTAGE_VOLUME capability.
	StageUnstage bool

	// MaxIDLength caps volume, snapshot and group snapshot IDs, in bytes.
	// Zero means DefaultMaxIDLength.
	MaxIDLength int

	// MaxNameLength caps the names of CreateVolume, CreateSnapshot and
	// CreateVolumeGroupSnapshot, in bytes. Zero means DefaultMaxNameLength.
	MaxNameLength int

	// MaxNodeIDLength caps node IDs, in bytes. Zero means
	// DefaultMaxNodeIDLength.
	MaxNodeIDLength int
}

// zeroConfig is used when Validate gets a nil *Config.
var zeroConfig Config

func (c *Config) accessTypes() AccessType {
	if t := c.AccessTypes & (Mount | Block); t != 0 {
		return t
	}
	return Mount | Block
}

func (c *Config) maxID() int     { return orDefault(c.MaxIDLength, DefaultMaxIDLength) }
func (c *Config) maxName() int   { return orDefault(c.MaxNameLength, DefaultMaxNameLength) }
func (c *Config) maxNodeID() int { return orDefault(c.MaxNodeIDLength, DefaultMaxNodeIDLength) }

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// knownMode reports whether m is a mode CSI v1.14 defines, UNKNOWN excluded.
func knownMode(m csi.VolumeCapability_AccessMode_Mode) bool {
	return m > csi.VolumeCapability_AccessMode_UNKNOWN &&
		m <= csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
}

// modeAllowed reports whether the driver supports access mode m.
func (c *Config) modeAllowed(m csi.VolumeCapability_AccessMode_Mode) bool {
	if !knownMode(m) {
		return false
	}
	if len(c.AccessModes) == 0 {
		return true
	}
	for _, a := range c.AccessModes {
		if a == m {
			return true
		}
	}
	return false
}

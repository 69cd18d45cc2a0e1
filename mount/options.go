package mount

import "github.com/csikit/csikit/crypt"

// Encryption makes a volume encrypted at rest with LUKS2 (package crypt):
// the file system (or, through OpenEncrypted, the raw block volume) lives
// on a dm-crypt mapping of the device.
type Encryption struct {
	// VolumeID names the mapping (crypt.MappingName), the same on every
	// node and after a restart.
	VolumeID string
	// Key gives the passphrase: crypt.SecretKeys(req.GetSecrets()) for the
	// node-stage secret's crypt.SecretKey, or a KMS. Unstage does not need
	// it.
	Key crypt.KeyProvider
	// AllowDiscards passes the file system's discards (TRIM) through the
	// mapping: thin storage frees the space, at the cost of showing an
	// observer of the device which blocks are unused.
	AllowDiscards bool
}

// StageOptions describes a NodeStageVolume mount: a file system on Device,
// formatted if blank, mounted at Target.
type StageOptions struct {
	// Device is the block device node to mount (e.g. /dev/loop3), or for
	// file systems without a device the source mount(8) expects ("tmpfs",
	// "server:/export").
	Device string
	// Target is the staging directory; it is created when missing.
	Target string
	// FSType is the file system type; default "ext4".
	FSType string
	// MountFlags are mount options ("noatime", "discard", "ro", ...).
	// bind, remount and propagation options are refused.
	MountFlags []string
	// SensitiveMountFlags are mount options that must not be logged or
	// appear in errors (credentials of network file systems).
	SensitiveMountFlags []string
	// ReadOnly mounts the file system read-only, and refuses to format a
	// blank device. An existing ext2/3/4 file system is checked with
	// "fsck -a" before a read-write mount, not before a read-only one.
	ReadOnly bool
	// FormatOptions are extra arguments to mkfs.<FSType>, placed before
	// the device (e.g. "-b", "4096"); used only when Device is blank.
	FormatOptions []string
	// XFSUUIDCheck keeps xfs's refusal to mount a file system whose UUID
	// is mounted already. By default Stage mounts xfs with nouuid: a
	// clone or a restored snapshot is a block copy of its source, UUID
	// included, and without nouuid it cannot be staged on a node where
	// its source is ("invalid argument", nothing more). Set it only where
	// one file system can appear under two devices (multipath without
	// dm-multipath) and a second mount must be refused.
	XFSUUIDCheck bool
	// Grow grows an existing ext2/3/4 file system that is smaller than
	// its device to the device's size before mounting it (e2fsck -f, then
	// resize2fs): a volume expanded while it was not staged then needs no
	// online resize, which the kernel allows only to a process holding
	// CAP_SYS_RESOURCE (see CanResizeOnline). Not on a read-only stage,
	// nor for xfs (which grows only mounted: Resize).
	Grow bool
	// Encryption, when set, encrypts the volume: Device is then the
	// backing device, formatted with LUKS2 when blank (never when it holds
	// anything else: codes.FailedPrecondition), opened as a dm-crypt
	// mapping, and the file system is made on and mounted from the
	// mapping. A wrong key is codes.InvalidArgument and changes nothing.
	// A read-only stage never formats.
	Encryption *Encryption
}

// PublishOptions describes a NodePublishVolume mount: Source bound onto
// Target.
type PublishOptions struct {
	// Source is the directory to publish, usually the staging path. It
	// must be a mount point unless AllowUnmountedSource is set.
	Source string
	// SourceDevice, when set, is the block device that must be mounted at
	// Source (compared by device number): Publish refuses with
	// codes.FailedPrecondition when Source holds anything else.
	SourceDevice string
	// AllowUnmountedSource lets Source be a plain directory rather than a
	// mount point: a directory-backed volume the driver keeps on its own
	// file system (hostpath-style). Without it, a Source that is not a
	// mount point — a staging path whose stage failed or was undone — is
	// refused with codes.FailedPrecondition, because the pod would write
	// to the node's disk.
	AllowUnmountedSource bool
	// Target is the directory the volume appears at; it is created (with
	// missing parents) when missing. No component of it may be a symlink.
	Target string
	// ReadOnly makes the bind mount read-only.
	ReadOnly bool
	// MountFlags are extra per-mount flags for the bind ("nosuid",
	// "noexec", "nodev", "noatime", ...). File-system options, and flags
	// of a whole file system (sync, dirsync, lazytime), are refused with
	// codes.InvalidArgument (CheckBindFlags): a bind mount shares the
	// source's file system and cannot change it.
	MountFlags []string
}

// UnmountOptions tunes Unpublish and Unstage.
type UnmountOptions struct {
	// Lazy detaches a busy mount (MNT_DETACH) instead of failing with
	// FailedPrecondition. Processes still using it keep their view until
	// they let go.
	Lazy bool
	// Encryption, when set, closes the volume's dm-crypt mapping after the
	// unmount (only VolumeID is used). A mapping already closed is fine.
	Encryption *Encryption
}

// GrowOfflineOptions describes an offline file system expansion
// (Mounter.GrowOffline).
type GrowOfflineOptions struct {
	// Path is the image file or block device holding the ext2/3/4 file
	// system: absolute, clean and without a symlink in it, and used by no
	// mount or loop device.
	Path string
}

// GrowOfflineResult says what Mounter.GrowOffline did.
type GrowOfflineResult struct {
	// Before and After are the file system's size in bytes, from its
	// superblock, before and after; equal when there was nothing to grow
	// (0 when Path holds no ext2/3/4 file system). After a failed grow,
	// After is the size the repaired file system has.
	Before, After int64
}

// ResizeOptions describes an online file system expansion.
type ResizeOptions struct {
	// Device is the block device holding the file system.
	Device string
	// Path is where the file system is mounted.
	Path string
	// Encryption, when set, means Device is the backing device of an
	// encrypted volume: its mapping is grown to the device's size first
	// (LUKS2 needs the key for that: from the node-expand secret), then
	// the file system on it.
	Encryption *Encryption
}

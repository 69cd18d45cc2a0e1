package mount

import (
	"context"
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/crypt"
)

// OpenEncrypted opens the encrypted volume e on device and returns its
// dm-crypt mapping's device node, formatting device with LUKS2 first when
// it is blank and readOnly is false. Stage does this for
// StageOptions.Encryption; a raw block volume's stage calls it and
// publishes the mapping (block.MountBlock with the returned device). It is
// idempotent: an open mapping of the volume over device is returned as
// is. A device holding anything but LUKS is refused with
// codes.FailedPrecondition, a wrong key with codes.InvalidArgument; in
// neither case is the device changed.
func (m *Mounter) OpenEncrypted(ctx context.Context, device string, e Encryption, readOnly bool) (string, error) {
	if e.VolumeID == "" || e.Key == nil {
		return "", errorf(codes.InvalidArgument, nil, "encryption of %s needs a volume ID and a key", device)
	}
	defer m.lock("device:" + device)()
	name := crypt.MappingName(e.VolumeID)
	// Open already over device: one cryptsetup run (none when the
	// mapping's node is missing), and no key asked of a KMS. Open, below,
	// tells the other cases apart (AlreadyExists for another device).
	switch err := m.crypt.Check(ctx, name, device); status.Code(err) {
	case codes.OK:
		return filepath.Join(crypt.MapperDir, name), nil
	case codes.FailedPrecondition:
	default:
		return "", err
	}
	key, err := e.Key.Key(ctx, e.VolumeID)
	if err != nil {
		return "", err
	}
	if !readOnly {
		if _, err := m.crypt.Format(ctx, device, key); err != nil {
			return "", err
		}
	}
	return m.crypt.Open(ctx, device, name, key, e.AllowDiscards)
}

// CloseEncrypted closes the dm-crypt mapping of volumeID; a closed one is
// fine. One still in use (mounted, published) is
// codes.FailedPrecondition.
func (m *Mounter) CloseEncrypted(ctx context.Context, volumeID string) error {
	return m.crypt.Close(ctx, crypt.MappingName(volumeID))
}

// CheckEncrypted reports an abnormal condition of the encrypted volume's
// mapping (crypt.Crypt.Check): nil when it is open over device ("" for any
// device).
func (m *Mounter) CheckEncrypted(ctx context.Context, volumeID, device string) error {
	return m.crypt.Check(ctx, crypt.MappingName(volumeID), device)
}

// ResizeEncrypted grows the open mapping of e to its device's size (after
// the device grew) and returns the mapping's device node: the step before
// a file system's Resize (ResizeOptions.Encryption does both), or all a
// raw block volume needs. LUKS2 needs the key for it.
func (m *Mounter) ResizeEncrypted(ctx context.Context, e Encryption) (string, error) {
	if e.VolumeID == "" || e.Key == nil {
		return "", errorf(codes.InvalidArgument, nil, "expansion of an encrypted volume needs its volume ID and key")
	}
	key, err := e.Key.Key(ctx, e.VolumeID)
	if err != nil {
		return "", err
	}
	name := crypt.MappingName(e.VolumeID)
	if _, err := m.crypt.Resize(ctx, name, key); err != nil {
		return "", err
	}
	return crypt.MapperDir + "/" + name, nil
}

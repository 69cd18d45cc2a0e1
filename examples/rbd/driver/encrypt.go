package driver

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ceph/go-ceph/rbd"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/mount"
)

// ParamEncrypted "true" encrypts a volume at rest (StorageClass
// parameter): the node formats the mapped image with LUKS2 on its first
// stage and puts the file system (or the raw block volume) on a dm-crypt
// mapping of it, with the passphrase under crypt.SecretKey
// ("encryptionPassphrase") in the node-stage secret (and, for expansion,
// the node-expand secret). "false" or absent: plain. CreateVolume records
// it in the volume context, which the CO hands to every NodeStageVolume.
const ParamEncrypted = "encrypted"

// checkEncrypted validates ParamEncrypted at CreateVolume and reports
// whether the volume is encrypted.
func checkEncrypted(params map[string]string) (bool, error) {
	switch v := params[ParamEncrypted]; v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, status.Errorf(codes.InvalidArgument, "parameter %q = %q: want \"true\" or \"false\"", ParamEncrypted, v)
	}
}

// newMounter is the driver's Mounter, whose Crypt derives the keys of the
// slots it formats with o.EncryptionPBKDF.
func newMounter(o Options) *mount.Mounter {
	c := crypt.New(crypt.Options{
		Prober: mount.New(mount.Options{Runner: o.Runner, Logger: o.Logger}),
		PBKDF:  o.EncryptionPBKDF, Logger: o.Logger,
	})
	return mount.New(mount.Options{Runner: o.Runner, Logger: o.Logger, Crypt: c})
}

// encryption is the mount option of an encrypted volume id, its key read
// from secrets (crypt.SecretKey); nil for a plain one.
func encryption(id volumeID, encrypted bool, secrets map[string]string) *mount.Encryption {
	if !encrypted {
		return nil
	}
	return &mount.Encryption{VolumeID: id.String(), Key: crypt.SecretKeys(secrets)}
}

// checkKey refuses an encrypted stage whose secret holds no passphrase
// before anything is mapped: InvalidArgument naming the key (never a
// value) and the StorageClass parameters that pass the secret.
func checkKey(ctx context.Context, e *mount.Encryption) error {
	if e == nil {
		return nil
	}
	_, err := e.Key.Key(ctx, e.VolumeID)
	return err
}

// dataDevice is the device a staged volume's data lives on: the image's
// mapped device for a plain volume; for an encrypted one its dm-crypt
// mapping, which must be open over dev (FailedPrecondition naming the
// mapping otherwise: closed behind the driver's back, or lost with a
// reboot; staging again opens it).
func (d *Driver) dataDevice(ctx context.Context, id volumeID, rec stageRecord, dev string) (string, error) {
	if !rec.Encrypted {
		return dev, nil
	}
	if err := d.mounter.CheckEncrypted(ctx, id.String(), dev); err != nil {
		return "", status.Errorf(codes.FailedPrecondition, "volume %s: %s; stage it again", id, status.Convert(err).Message())
	}
	return filepath.Join(crypt.MapperDir, crypt.MappingName(id.String())), nil
}

// mappingOpen is NodeGetVolumeStats' check of a staged encrypted volume:
// NotFound when its dm-crypt mapping's node is gone (the file system or
// block device the pod sees is then not the volume's). One stat, no
// cryptsetup run: kubelet asks for every volume every minute.
func mappingOpen(id volumeID, rec stageRecord) error {
	if !rec.Encrypted {
		return nil
	}
	node := filepath.Join(crypt.MapperDir, crypt.MappingName(id.String()))
	if _, err := os.Stat(node); errors.Is(err, fs.ErrNotExist) {
		return status.Errorf(codes.NotFound, "volume %s is staged on this node but its dm-crypt mapping %s is not open: stage it again", id, node)
	} else if err != nil {
		return status.Errorf(codes.Internal, "dm-crypt mapping of volume %s: %v", id, err)
	}
	return nil
}

// luksMagic starts every LUKS header (version 1 and 2).
var luksMagic = []byte("LUKS\xba\xbe")

// hasLUKSHeader reports whether the image starts with a LUKS header: an
// encrypted volume, once staged. (ControllerExpandVolume has no volume
// context to say so; one read of 6 bytes does.) A read error counts as
// encrypted: a needless NodeExpandVolume costs little, a missing one
// leaves the mapping small.
func hasLUKSHeader(img *rbd.Image) bool {
	b := make([]byte, len(luksMagic))
	n, err := img.ReadAt(b, 0)
	if err != nil && n < len(b) {
		return true
	}
	return bytes.Equal(b, luksMagic)
}

package crypt

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// SecretKey is the key of the node-stage secret (and, for expansion, the
// node-expand secret) whose value is a volume's passphrase: the
// StorageClass names the secret with the external-provisioner's
// csi.storage.k8s.io/node-stage-secret-name and -namespace parameters
// (templates such as ${pvc.name} give each volume its own secret).
const SecretKey = "encryptionPassphrase"

// KeyProvider gives the passphrase of a volume: from the CSI call's
// secret (SecretKeys), or from a KMS, which may wrap a per-volume key.
//
// Key rotation is a follow-up, not done yet. The plan: an optional
// interface beside this one,
//
//	type Rotator interface {
//		// NextKey returns the volume's new passphrase, and the old one
//		// the header opens with now.
//		NextKey(ctx context.Context, volumeID string) (next, current []byte, err error)
//	}
//
// and Crypt.AddKey (cryptsetup luksAddKey into a free slot, the current
// passphrase authorising it) then Crypt.KillSlot (luksKillSlot of the
// slot the current one opens, authorised by the new one), run at stage
// when the provider is a Rotator, so a crash between the two leaves a
// header both passphrases open. What blocks it: luksAddKey needs two
// secrets at once, and command.Run passes one (stdin); the second needs
// an inherited pipe (cryptsetup's --new-keyfile=/dev/fd/3), which package
// command does not offer yet. Until then rotate by hand on a node where
// the volume is staged: cryptsetup luksAddKey, then luksKillSlot, then
// update the secret. (LUKS2's volume key is unchanged by either: a
// re-encryption, cryptsetup reencrypt, is what changes it.)
type KeyProvider interface {
	Key(ctx context.Context, volumeID string) ([]byte, error)
}

// StaticKey is a KeyProvider that always gives the same passphrase.
type StaticKey []byte

// Key returns a copy of k; an empty k is codes.InvalidArgument.
func (k StaticKey) Key(context.Context, string) ([]byte, error) {
	if err := checkKey(k); err != nil {
		return nil, err
	}
	return append([]byte(nil), k...), nil
}

// String hides the key from fmt and loggers.
func (k StaticKey) String() string { return "[REDACTED]" }

// SecretKeys is a KeyProvider reading the passphrase from a CSI call's
// secrets (NodeStageVolumeRequest.Secrets) under SecretKey.
type SecretKeys map[string]string

// Key returns the passphrase in the secret; a missing or empty one is
// codes.InvalidArgument naming the key and the StorageClass parameters
// that pass the secret.
func (s SecretKeys) Key(_ context.Context, volumeID string) ([]byte, error) {
	v := s[SecretKey]
	if v == "" {
		return nil, status.Errorf(codes.InvalidArgument,
			"volume %s is encrypted but the call's secret has no %q: set csi.storage.k8s.io/node-stage-secret-name and -namespace (and node-expand-secret-*) in the StorageClass to a secret holding it",
			volumeID, SecretKey)
	}
	return []byte(v), nil
}

// String hides the secret's values from fmt and loggers.
func (s SecretKeys) String() string { return fmt.Sprintf("[%d secret values REDACTED]", len(s)) }

// Check reports what is wrong with the mapping of an encrypted volume
// that should be open over device: nil when it is open over device, else
// an error saying that it is missing (closed behind the driver's back, or
// lost with a reboot) or maps something else. Health checks report it as
// an abnormal condition.
func (c *Crypt) Check(ctx context.Context, name, device string) error {
	st, err := c.Status(ctx, name)
	if err != nil {
		return err
	}
	if !st.Active {
		return status.Errorf(codes.FailedPrecondition, "the dm-crypt mapping %s of the encrypted volume is not open", name)
	}
	if device != "" && !sameDevice(st.Device, device) {
		return status.Errorf(codes.FailedPrecondition, "the dm-crypt mapping %s maps %s, not the volume's device %s", name, st.Device, device)
	}
	return nil
}

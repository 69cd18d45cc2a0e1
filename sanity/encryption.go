package sanity

import (
	"bytes"
	"context"
	"maps"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// EncryptionConfig turns on the Encryption area, for drivers that encrypt
// volumes at rest: Config.Parameters (or Secrets) must make every volume
// encrypted, with the passphrase in Secrets under KeySecret.
type EncryptionConfig struct {
	// KeySecret is the key of Config.Secrets holding the passphrase
	// (csikit's crypt.SecretKey, "encryptionPassphrase"); the area stages
	// with another value there and expects a refusal.
	KeySecret string
	// RawData returns what the backend stores for the volume, read
	// without the driver: its image file, its device below the mapping.
	// The area calls it only while the volume is not staged.
	RawData func(ctx context.Context, volumeID string) ([]byte, error)
}

// canary is plaintext the Encryption area writes and then looks for in
// the backend's raw data.
var canary = bytes.Repeat([]byte("csikit-sanity-plaintext-canary/"), chunk/31+1)[:chunk]

// encryptionCases check encryption at rest: data written through a
// published volume is not in the backend's raw data, and a stage with a
// wrong passphrase is refused and changes nothing.
func encryptionCases(t *testing.T, s *suite) {
	e := s.cfg.Encryption
	s.needNode(t)
	s.needCtrl(t, ccCreate)
	if !s.nodeCaps[csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		t.Skip("encryption is checked through NodeStageVolume: the driver does not advertise STAGE_UNSTAGE_VOLUME")
	}
	raw := func(t *testing.T, id string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
		defer cancel()
		b, err := e.RawData(ctx, id)
		if err != nil {
			t.Fatalf("EncryptionConfig.RawData(%s): %v", id, err)
		}
		return b
	}
	s.run(t, "no_plaintext_at_rest_and_wrong_key_refused", func(t *testing.T) {
		v := s.createVolume(t, s.createReq(s.name("enc")))
		m := s.mountVolume(t, v, false)
		if err := s.cfg.NodeFS.WriteAt(m.data(s.access), canary, 0); err != nil {
			t.Fatalf("writing through published volume %s: %v", v.GetVolumeId(), err)
		}
		s.unpublish(t, m)
		s.unstage(t, m)
		before := raw(t, v.GetVolumeId())
		expect(t, !bytes.Contains(before, canary[:64]), "NodeUnstageVolume", nil,
			"encryption at rest: data written through the volume is not stored in plaintext",
			"the plaintext written through volume %s is in the backend's raw data", v.GetVolumeId())

		req := s.stageReq(m)
		req.Secrets = maps.Clone(s.cfg.Secrets)
		req.Secrets[e.KeySecret] += "-wrong"
		_, err := retry(s, s.node.NodeStageVolume, req)
		if err == nil {
			s.unstage(t, m)
		}
		c := status.Code(err)
		expect(t, c == codes.InvalidArgument || c == codes.FailedPrecondition, "NodeStageVolume", req,
			"encryption at rest: a stage with a wrong passphrase fails with INVALID_ARGUMENT or FAILED_PRECONDITION",
			"got %v (%v)", c, err)
		expect(t, bytes.Equal(before, raw(t, v.GetVolumeId())), "NodeStageVolume", req,
			"encryption at rest: a stage with a wrong passphrase changes nothing on the volume",
			"the backend's raw data of volume %s changed", v.GetVolumeId())

		s.stage(t, m)
		s.nodePublish(t, m, false)
		got, err := s.cfg.NodeFS.ReadAt(m.data(s.access), len(canary), 0)
		expect(t, err == nil && bytes.Equal(got, canary), "NodeStageVolume", s.stageReq(m),
			"encryption at rest: the right passphrase gives the data back", "reading back: %v", err)
	})
}

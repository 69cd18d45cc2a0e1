//go:build linux

package driver_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/sanity"
)

// TestSanityEncrypted runs the conformance harness's DataPath and
// Encryption areas against hostpath with every volume encrypted (fs and
// block), in the VM lane: data survives republish, snapshots, clones and
// expansion through the mapping; no plaintext at rest; a wrong passphrase
// is refused and changes nothing.
func TestSanityEncrypted(t *testing.T) {
	runEncryptedSanity(t, sanity.DataPath|sanity.Encryption)
}

func runEncryptedSanity(t *testing.T, areas sanity.Area) {
	if inCryptVM(t) {
		return
	}
	csitest.RequireRoot(t, "hostpath mounts filesystems and opens dm-crypt mappings")
	csitest.RequireCommand(t, "cryptsetup", "cryptsetup-bin")
	for _, tool := range []string{"mkfs.ext4", "resize2fs"} {
		csitest.RequireCommand(t, tool, "e2fsprogs")
	}
	state := t.TempDir()
	log := &sanity.LogBuffer{}
	logger := slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	const nodeID = "sanity-node"
	target := sanity.Restartable(func() (any, csikit.Options, error) {
		d, err := driver.New(context.Background(), driver.Options{
			StateDir: state, NodeID: nodeID, Logger: logger, EncryptionPBKDF: cheapKDF,
			EnableAttach: true, EnableModify: true, MutableParameters: []string{"iops"},
			// In the VM the state directory is on tmpfs: offer more than
			// its free memory (images are sparse), as TestSanity's disk does.
			Capacity: 64 << 30,
		})
		if err != nil {
			return nil, csikit.Options{}, err
		}
		return d, csikit.Options{
			Name: "hostpath.csikit.dev", Version: "v0.0.0-sanity", NodeID: nodeID,
			Topology:    map[string]string{driver.TopologyKey: nodeID},
			VolumeModes: csikit.Mount | csikit.Block, AccessModes: driver.AccessModes(),
			SingleNodeMultiWriter: true, Alpha: true,
			Clone: true, ReadOnlyPublish: true, ListPublishedNodes: true,
			Journal: d.Journal(), Logger: logger,
		}, nil
	})
	secrets := sanity.DefaultSecrets()
	secrets[crypt.SecretKey] = passphrase
	start := time.Now()
	sanity.Run(t, target, sanity.Config{
		Areas:      areas,
		Skip:       resizeSkips(t),
		AccessType: sanity.BothAccess,
		VolumeSize: 16 << 20,
		// The VM may run under TCG: a 1 GiB ext4 volume's CreateVolume
		// (mkfs size probe) takes longer than the default 30 s there.
		CallTimeout: 3 * time.Minute,
		ExpandSize:  32 << 20,
		Parameters:  map[string]string{driver.ParamFSType: "ext4", driver.ParamEncrypted: "true"},
		Secrets:     secrets,
		Encryption: &sanity.EncryptionConfig{KeySecret: crypt.SecretKey, RawData: func(_ context.Context, id string) ([]byte, error) {
			return os.ReadFile(filepath.Join(state, "images", id+".img"))
		}},
		Log:            log.Bytes,
		BackendObjects: driver.StateObjects(state),
	})
	t.Logf("sanity against encrypted hostpath volumes took %v", time.Since(start))
}

//go:build linux

package driver_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/csitest/vmtest"
	"github.com/csikit/csikit/examples/hostpath/driver"
)

// inCryptVM runs the calling test in the VM when this kernel has no
// device-mapper; true means it ran there and the caller returns.
func inCryptVM(t *testing.T) bool {
	t.Helper()
	if _, err := os.Stat("/dev/mapper/control"); err == nil || vmtest.InGuest() {
		return false
	}
	return vmtest.Delegate(t, vmOptions) // dm-crypt among its modules
}

// cheapKDF keeps key slots cheap in tests (the VM may run under TCG).
var cheapKDF = crypt.PBKDF{Type: "pbkdf2", Iterations: 1000}

// passphrase is a node-stage secret's value with quotes and newlines.
const passphrase = "pass \"phrase\" with 'quotes'\nand a newline\n"

// TestEncryptedVolumes stages, publishes and unstages encrypted
// filesystem and block volumes: the data reaches the pod, never the
// backing image in plaintext; a wrong or missing key is refused with the
// image's header untouched.
func TestEncryptedVolumes(t *testing.T) {
	if inCryptVM(t) {
		return
	}
	needRoot(t)
	csitest.RequireCommand(t, "cryptsetup", "cryptsetup-bin")
	csitest.RequireCommand(t, "mkfs.ext4", "e2fsprogs")
	state := shortDir(t, "hp-enc-")
	s := serve(t, "", driver.Options{StateDir: state, EncryptionPBKDF: cheapKDF})
	ctx := context.Background()
	secrets := map[string]string{crypt.SecretKey: passphrase}
	params := map[string]string{driver.ParamFSType: "ext4", driver.ParamEncrypted: "true"}
	for _, blk := range []bool{false, true} {
		name := map[bool]string{false: "fs", true: "block"}[blk]
		t.Run(name, func(t *testing.T) {
			c := capFor(blk, "ext4")
			resp, err := s.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "enc-" + name, Parameters: params,
				CapacityRange: &csi.CapacityRange{RequiredBytes: 32 << 20}, VolumeCapabilities: []*csi.VolumeCapability{c}})
			if err != nil {
				t.Fatal(err)
			}
			id := resp.GetVolume().GetVolumeId()
			img := filepath.Join(state, "images", id+".img")
			detachAtCleanup(t, img)
			tmp := shortDir(t, "hp-enc-t-")
			staging, target := filepath.Join(tmp, "staging"), filepath.Join(tmp, "target")
			unmountAtCleanup(t, target, staging)
			stage := &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: c}
			unstage := &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}

			// No key: refused, nothing formatted.
			if _, err := s.node.NodeStageVolume(ctx, stage); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), crypt.SecretKey) {
				t.Fatalf("stage without the secret: %v; want InvalidArgument naming %s", err, crypt.SecretKey)
			}
			stage.Secrets = secrets
			if _, err := s.node.NodeStageVolume(ctx, stage); err != nil {
				t.Fatal(err)
			}
			pub := &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: c}
			if _, err := s.node.NodePublishVolume(ctx, pub); err != nil {
				t.Fatal(err)
			}
			canary := bytes.Repeat([]byte("HOSTPATH-ENC-CANARY/"), 2048)
			if blk {
				f, err := os.OpenFile(target, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt(canary, 1<<20); err != nil {
					t.Fatal(err)
				}
				f.Sync()
				f.Close()
			} else if err := os.WriteFile(filepath.Join(target, "canary"), canary, 0o600); err != nil {
				t.Fatal(err)
			}
			st, err := s.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
			if err != nil || len(st.GetUsage()) == 0 {
				t.Fatalf("stats through the mapping: %v, %v", st, err)
			}
			if _, err := s.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.node.NodeUnstageVolume(ctx, unstage); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(crypt.MapperDir, crypt.MappingName(id))); err == nil {
				t.Fatal("the mapping is still open after unstage")
			}
			raw, err := os.ReadFile(img)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(raw, []byte("HOSTPATH-ENC-CANARY")) {
				t.Fatal("plaintext canary in the backing image")
			}
			head := append([]byte(nil), raw[:crypt.HeaderBytes]...)
			stage.Secrets = map[string]string{crypt.SecretKey: passphrase + "x"}
			if _, err := s.node.NodeStageVolume(ctx, stage); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("stage with a wrong key: %v, want InvalidArgument", err)
			}
			raw, _ = os.ReadFile(img)
			if !bytes.Equal(head, raw[:crypt.HeaderBytes]) {
				t.Fatal("a stage with a wrong key changed the header")
			}
			// Right key again: the data is there.
			stage.Secrets = secrets
			if _, err := s.node.NodeStageVolume(ctx, stage); err != nil {
				t.Fatal(err)
			}
			if !blk {
				got, err := os.ReadFile(filepath.Join(staging, "canary"))
				if err != nil || !bytes.Equal(got, canary) {
					t.Fatalf("canary after restage: %v", err)
				}
			}
			// A mapping closed under a staged volume is an abnormal condition.
			if blk {
				if out, err := exec.Command("cryptsetup", "close", crypt.MappingName(id)).CombinedOutput(); err != nil {
					t.Fatalf("cryptsetup close: %v: %s", err, out)
				}
				h, err := s.node.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: id, StagingTargetPath: staging})
				if err != nil || !strings.Contains(h.String(), driver.ReasonMappingGone) {
					t.Fatalf("health with the mapping closed: %v, %v; want %s", h, err, driver.ReasonMappingGone)
				}
			}
			if _, err := s.node.NodeUnstageVolume(ctx, unstage); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
				t.Fatal(err)
			}
		})
	}
	_, err := s.ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "enc-dir", Parameters: map[string]string{driver.ParamEncrypted: "true"},
		VolumeCapabilities: []*csi.VolumeCapability{capFor(false, "")}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("encrypted directory volume: %v, want InvalidArgument", err)
	}
}

//go:build linux

package main_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ceph/go-ceph/rbd"
	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/examples/rbd/internal/cephtest"
	"github.com/csikit/csikit/sanity"
)

// cheapKDF keeps the tests' key slots cheap (the VM may run under TCG).
var cheapKDF = crypt.PBKDF{Type: "pbkdf2", Iterations: 1000}

// luksPassphrase is a node-stage secret's passphrase with quotes and
// newlines.
const luksPassphrase = "rbd \"pass\" 'phrase'\nwith a newline\n"

// canary is the plaintext written through encrypted volumes and looked
// for in the raw image.
var canary = bytes.Repeat([]byte("CSIKIT-RBD-PLAINTEXT-CANARY."), 64)

// encServer serves a driver with mapper on state, its key slots cheap.
func encServer(t *testing.T, c cephtest.Cluster, mapper, state string) (*csitest.Server, *driver.Driver) {
	t.Helper()
	d, err := driver.New(driver.Options{Monitors: c.Monitors, DefaultPool: c.Pool, NodeID: "enc-node", StateDir: state,
		Mapper: mapper, EncryptionPBKDF: cheapKDF,
		// Under TCG on a loaded host a krbd map or mkfs probe took over
		// the default 30 s: the bound is for hung tools, not emulation.
		OpTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s, err := csitest.Start(d.Service(), d.ServerOptions(csikit.Options{Name: "rbd.csikit.dev", Version: "v0.0.0-enc", NodeID: "enc-node"}))
	if err != nil {
		_ = d.Close()
		t.Fatal(err)
	}
	return s, d
}

// createEncrypted creates the encrypted 16 MiB volume name with
// capability vc on s, and returns it with its deletion, for the test to
// defer before the server's Close.
func createEncrypted(t *testing.T, s *csitest.Server, c cephtest.Cluster, name string, vc *csi.VolumeCapability) (*csi.Volume, func()) {
	t.Helper()
	ctx := context.Background()
	resp, err := s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{vc},
		Parameters: map[string]string{driver.ParamPool: c.Pool, driver.ParamEncrypted: "true"}, Secrets: c.Secrets(),
		CapacityRange: &csi.CapacityRange{RequiredBytes: 16 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	vol := resp.GetVolume()
	return vol, func() {
		if _, err := s.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol.GetVolumeId(), Secrets: c.Secrets()}); err != nil {
			t.Errorf("delete: %v", err)
		}
	}
}

// encSecrets are c's Ceph credentials plus passphrase under crypt.SecretKey.
func encSecrets(c cephtest.Cluster, passphrase string) map[string]string {
	s := c.Secrets()
	s[crypt.SecretKey] = passphrase
	return s
}

// TestEncryptedParameter: CreateVolume takes encrypted "true" or "false"
// (recorded in the volume context, which every NodeStageVolume gets) and
// refuses anything else with InvalidArgument naming the parameter, before
// an image is made.
func TestEncryptedParameter(t *testing.T) {
	c := cephtest.Require(t)
	ctx := context.Background()
	s, d := encServer(t, c, driver.MapperFUSE, t.TempDir())
	defer func() { _ = s.Close(); _ = d.Close() }()
	vc := sanityKinds[0].capability()
	create := func(name, value string) (*csi.CreateVolumeResponse, error) {
		return s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{vc},
			Parameters: map[string]string{driver.ParamPool: c.Pool, driver.ParamEncrypted: value}, Secrets: c.Secrets(),
			CapacityRange: &csi.CapacityRange{RequiredBytes: 16 << 20}})
	}
	for _, bad := range []string{"yes", "TRUE", "1", " true"} {
		_, err := create("enc-param-bad", bad)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), `"encrypted"`) {
			t.Errorf("encrypted=%q: CreateVolume = %v; want InvalidArgument naming the parameter", bad, err)
		}
	}
	for _, tc := range []struct{ value, want string }{{"true", "true"}, {"false", ""}, {"", ""}} {
		resp, err := create("enc-param-"+tc.value, tc.value)
		if err != nil {
			t.Fatalf("encrypted=%q: %v", tc.value, err)
		}
		if got := resp.GetVolume().GetVolumeContext()[driver.ParamEncrypted]; got != tc.want {
			t.Errorf("encrypted=%q: volume context has encrypted=%q, want %q", tc.value, got, tc.want)
		}
		if _, err := s.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: resp.GetVolume().GetVolumeId(), Secrets: c.Secrets()}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEncryptedStageWithoutKey: staging an encrypted volume whose
// node-stage secret lacks the passphrase (or has it empty) is
// InvalidArgument naming crypt.SecretKey and no secret value, and leaves
// nothing mapped and no stage record.
func TestEncryptedStageWithoutKey(t *testing.T) {
	c := cephtest.Require(t)
	ctx := context.Background()
	state := t.TempDir()
	s, d := encServer(t, c, driver.MapperFUSE, state)
	defer func() { _ = s.Close(); _ = d.Close() }()
	vc := sanityKinds[0].capability()
	vol, del := createEncrypted(t, s, c, "enc-nokey", vc)
	defer del()
	for name, secrets := range map[string]map[string]string{"missing": c.Secrets(), "empty": encSecrets(c, "")} {
		staging := filepath.Join(t.TempDir(), "staging")
		_, err := s.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging,
			VolumeCapability: vc, VolumeContext: vol.GetVolumeContext(), Secrets: secrets})
		msg := status.Convert(err).Message()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(msg, crypt.SecretKey) {
			t.Errorf("%s passphrase: stage = %v; want InvalidArgument naming %q", name, err, crypt.SecretKey)
		}
		for k, v := range secrets {
			if v != "" && strings.Contains(msg, v) {
				t.Errorf("%s passphrase: the error carries the value of secret %q", name, k)
			}
		}
		if m := mappings(t, driver.MapperFUSE, state); len(m) != 0 {
			t.Errorf("%s passphrase: the refused stage left %q mapped", name, m)
		}
		if ents, _ := os.ReadDir(filepath.Join(state, "staged")); len(ents) != 0 {
			t.Errorf("%s passphrase: the refused stage left a stage record", name)
		}
	}
}

// encryptedLifecycle (VM lane, krbd): an encrypted volume of kind is
// staged (the blank image formatted with LUKS2, the data on its dm-crypt
// mapping), published, written with a canary, grown online, survives a
// driver restart, and unstaged (mapping closed, image unmapped, also when
// the stage was the driver's before the restart). The raw image read with
// `rbd export` holds a LUKS2 header and no canary. Restaging with a wrong
// passphrase is InvalidArgument, maps nothing and leaves the header as it
// was; the right one then finds the data.
func encryptedLifecycle(t *testing.T, c cephtest.Cluster, kind sanityKind) {
	ctx := context.Background()
	state := t.TempDir()
	mapper := driver.MapperKRBD
	s, d := encServer(t, c, mapper, state)
	defer func() { _ = s.Close(); _ = d.Close() }()
	vc := kind.capability()
	params := map[string]string{driver.ParamPool: c.Pool, driver.ParamEncrypted: "true"}
	for k, v := range kind.params {
		params[k] = v
	}
	secrets := encSecrets(c, luksPassphrase)
	created, err := s.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "vm-enc-" + kind.name, VolumeCapabilities: []*csi.VolumeCapability{vc}, Parameters: params,
		Secrets: c.Secrets(), CapacityRange: &csi.CapacityRange{RequiredBytes: kind.size},
	})
	if err != nil {
		t.Fatal(err)
	}
	vol := created.GetVolume()
	defer func() {
		if _, err := s.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol.GetVolumeId(), Secrets: c.Secrets()}); err != nil {
			t.Errorf("delete: %v", err)
		}
	}()
	mapping := filepath.Join(crypt.MapperDir, crypt.MappingName(vol.GetVolumeId()))
	dir := t.TempDir()
	staging, target := filepath.Join(dir, "staging"), filepath.Join(dir, "target")
	stageReq := &csi.NodeStageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging, VolumeCapability: vc,
		VolumeContext: vol.GetVolumeContext(), Secrets: secrets}
	began := time.Now()
	if _, err := s.Node.NodeStageVolume(ctx, stageReq); err != nil {
		t.Fatalf("stage: %v", err)
	}
	t.Logf("latency: encrypted krbd %s stage (LUKS2 format, open, mkfs) %v", kind.name, time.Since(began).Round(time.Millisecond))
	if _, err := os.Stat(mapping); err != nil {
		t.Fatalf("after stage, no dm-crypt mapping: %v", err)
	}
	isBlock := kind.access == sanity.BlockAccess
	if !isBlock {
		if dev, _ := mountSource(t, staging); !strings.HasPrefix(dev, "/dev/mapper/") && !strings.HasPrefix(dev, "/dev/dm-") {
			t.Fatalf("the staging path is mounted from %q, not from the dm-crypt mapping", dev)
		}
	}
	pubReq := &csi.NodePublishVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging, TargetPath: target, VolumeCapability: vc}
	if _, err := s.Node.NodePublishVolume(ctx, pubReq); err != nil {
		t.Fatalf("publish: %v", err)
	}
	writeCanary(t, target, isBlock)
	readCanary(t, target, isBlock, "after publish")
	if _, err := s.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol.GetVolumeId(), VolumePath: target}); err != nil {
		t.Fatalf("stats: %v", err)
	}

	// Online expansion: the image, then the mapping (with the
	// node-expand secret's passphrase), then the file system.
	size := func() int64 {
		t.Helper()
		n, err := volumeBytes(target, isBlock)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := size()
	grown := 2 * kind.size
	ce, err := s.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: vol.GetVolumeId(),
		CapacityRange: &csi.CapacityRange{RequiredBytes: grown}, Secrets: c.Secrets(), VolumeCapability: vc})
	if err != nil {
		t.Fatalf("controller expand: %v", err)
	}
	if !ce.GetNodeExpansionRequired() {
		t.Fatal("controller expand of an encrypted volume did not ask for NodeExpandVolume")
	}
	expReq := &csi.NodeExpandVolumeRequest{VolumeId: vol.GetVolumeId(), VolumePath: target, StagingTargetPath: staging,
		CapacityRange: &csi.CapacityRange{RequiredBytes: grown}, VolumeCapability: vc}
	if _, err := s.Node.NodeExpandVolume(ctx, expReq); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("node expand without the node-expand secret: %v; want InvalidArgument (LUKS2 needs the key to grow the mapping)", err)
	}
	expReq.Secrets = secrets
	if _, err := s.Node.NodeExpandVolume(ctx, expReq); err != nil {
		t.Fatalf("node expand: %v", err)
	}
	if after := size(); after <= before+kind.size/2 {
		t.Fatalf("after expansion to %d bytes the volume shows %d (was %d)", grown, after, before)
	}
	readCanary(t, target, isBlock, "after expansion")
	if _, err := s.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.GetVolumeId(), TargetPath: target}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}

	// A restart: the new driver finds the mapping through the stage
	// record, and its unstage closes it.
	_ = s.Close()
	_ = d.Close()
	s, d = encServer(t, c, mapper, state)
	if _, err := s.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging}); err != nil {
		t.Fatalf("unstage after a restart: %v", err)
	}
	if _, err := os.Stat(mapping); err == nil {
		t.Fatalf("after unstage the dm-crypt mapping %s is still open", mapping)
	}
	if m := mappings(t, mapper, state); len(m) != 0 {
		t.Fatalf("after unstage, still mapped: %q", m)
	}

	// At rest: a LUKS2 header, and no plaintext anywhere in the image.
	pool, image := vol.GetVolumeContext()["pool"], vol.GetVolumeContext()["imageName"]
	header, plain := rawImage(t, c, pool, image)
	if !bytes.HasPrefix(header, []byte("LUKS\xba\xbe")) {
		t.Fatalf("the image does not start with a LUKS header: % x", header[:min(16, len(header))])
	}
	if plain {
		t.Fatal("the canary's plaintext is in the raw image")
	}

	// A wrong passphrase: refused, nothing mapped, the header unchanged.
	_, err = s.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging,
		VolumeCapability: vc, VolumeContext: vol.GetVolumeContext(), Secrets: encSecrets(c, luksPassphrase+"x")})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("stage with a wrong passphrase: %v; want InvalidArgument", err)
	}
	if strings.Contains(status.Convert(err).Message(), "phrase") {
		t.Fatalf("the refusal carries the passphrase: %v", err)
	}
	if m := mappings(t, mapper, state); len(m) != 0 {
		t.Fatalf("the refused stage left %q mapped", m)
	}
	if after, _ := rawImage(t, c, pool, image); !bytes.Equal(after, header) {
		t.Fatal("a stage with a wrong passphrase changed the LUKS header")
	}

	// The right one opens the data again (not a fresh format).
	if _, err := s.Node.NodeStageVolume(ctx, stageReq); err != nil {
		t.Fatalf("restage: %v", err)
	}
	if _, err := s.Node.NodePublishVolume(ctx, pubReq); err != nil {
		t.Fatalf("publish after restage: %v", err)
	}
	readCanary(t, target, isBlock, "after a restage")
	if _, err := s.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.GetVolumeId(), TargetPath: target}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	if _, err := s.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging}); err != nil {
		t.Fatalf("unstage: %v", err)
	}
	if _, err := os.Stat(mapping); err == nil {
		t.Fatalf("after the last unstage the dm-crypt mapping %s is still open", mapping)
	}
}

// writeCanary writes the canary through the published volume at target
// (a file on a mount volume, the start of a block volume) and syncs it.
func writeCanary(t *testing.T, target string, isBlock bool) {
	t.Helper()
	path, flags := filepath.Join(target, "canary"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC
	if isBlock {
		path, flags = target, os.O_WRONLY
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(canary); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// readCanary checks the volume at target reads the canary back.
func readCanary(t *testing.T, target string, isBlock bool, when string) {
	t.Helper()
	path := filepath.Join(target, "canary")
	if isBlock {
		path = target
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	defer f.Close()
	got := make([]byte, len(canary))
	if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, canary) {
		t.Fatalf("%s the volume does not read the canary back (%v)", when, err)
	}
}

// volumeBytes is the size the pod sees: the block device's, or the file
// system's.
func volumeBytes(target string, isBlock bool) (int64, error) {
	if isBlock {
		return block.DeviceSize(target)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(target, &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks) * st.Bsize, nil
}

// rawImage is what `rbd export` reads of an image, below any dm-crypt
// mapping (what a thief of the cluster's disks reads): its first
// crypt.HeaderBytes, and whether the canary's plaintext is anywhere in
// it. The image streams through (an xfs volume is hundreds of MiB; the
// VM's TMPDIR is memory).
func rawImage(t *testing.T, c cephtest.Cluster, pool, image string) (header []byte, hasCanary bool) {
	t.Helper()
	cmd := exec.Command("rbd", "-c", c.Conf, "--keyring", c.AdminKeyring, "--id", "admin", "export", pool+"/"+image, "-")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	needle := canary[:64]
	buf := make([]byte, 0, 4<<20+len(needle))
	chunk := make([]byte, 4<<20)
	for {
		n, rerr := io.ReadFull(out, chunk)
		if len(header) < crypt.HeaderBytes {
			header = append(header, chunk[:min(n, crypt.HeaderBytes-len(header))]...)
		}
		buf = append(buf, chunk[:n]...)
		if bytes.Contains(buf, needle) {
			hasCanary = true
		}
		buf = append(buf[:0], buf[max(0, len(buf)-len(needle)+1):]...)
		if rerr != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("rbd export %s/%s: %v: %s", pool, image, err, stderr.Bytes())
	}
	return header, hasCanary
}

// TestEncryptedBlockExpansionNeedsNode: ControllerExpandVolume of a block
// volume asks for NodeExpandVolume only when the image holds a LUKS
// header (an encrypted volume once staged): its dm-crypt mapping must
// grow with the image, which only the node can do. Before, no block
// volume asked, and an encrypted one stayed at its old size.
func TestEncryptedBlockExpansionNeedsNode(t *testing.T) {
	c := cephtest.Require(t)
	ctx := context.Background()
	s, d := encServer(t, c, driver.MapperFUSE, t.TempDir())
	defer func() { _ = s.Close(); _ = d.Close() }()
	vc := sanityKinds[2].capability()
	vol, del := createEncrypted(t, s, c, "enc-expand-block", vc)
	defer del()
	expand := func(size int64) bool {
		t.Helper()
		r, err := s.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: vol.GetVolumeId(),
			CapacityRange: &csi.CapacityRange{RequiredBytes: size}, Secrets: c.Secrets(), VolumeCapability: vc})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetNodeExpansionRequired()
	}
	if expand(24 << 20) {
		t.Error("a blank block image (no LUKS header yet) asked for node expansion")
	}
	// What the node's first stage writes first: the LUKS magic.
	conn := cephtest.Admin(t, c)
	io, err := conn.OpenIOContext(vol.GetVolumeContext()["pool"])
	if err != nil {
		t.Fatal(err)
	}
	defer io.Destroy()
	img, err := rbd.OpenImage(io, vol.GetVolumeContext()["imageName"], rbd.NoSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	_, err = img.WriteAt([]byte("LUKS\xba\xbe\x00\x02"), 0)
	if cerr := img.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if !expand(32 << 20) {
		t.Error("an encrypted block volume's expansion did not ask for NodeExpandVolume: its dm-crypt mapping would keep the old size")
	}
}

//go:build linux

package crypt_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/mount"
)

// encMounter is a Mounter whose Crypt uses the tests' cheap key slots.
func encMounter() *mount.Mounter {
	return mount.New(mount.Options{Crypt: crypt.New(crypt.Options{Prober: mount.New(mount.Options{}), PBKDF: testPBKDF})})
}

// TestEncryptedStage stages an encrypted ext4 volume through mount.Stage,
// writes a canary, grows it online, unstages it (the mapping closes),
// finds no canary in the raw image, refuses a wrong key with the header
// intact and reads the canary back with the right one.
func TestEncryptedStage(t *testing.T) {
	if inCryptVM(t) {
		return
	}
	img, dev := loopDevice(t, 64<<20)
	m := encMounter()
	ctx := context.Background()
	target := filepath.Join(t.TempDir(), "staging")
	enc := &mount.Encryption{VolumeID: "pvc-" + t.Name(), Key: crypt.StaticKey("a \"quoted\"\nkey")}
	name := crypt.MappingName(enc.VolumeID)
	t.Cleanup(func() {
		_ = unix.Unmount(target, unix.MNT_DETACH)
		_ = m.CloseEncrypted(context.Background(), enc.VolumeID)
	})
	so := mount.StageOptions{Device: dev, Target: target, FSType: "ext4", Encryption: enc}
	if err := m.Stage(ctx, so); err != nil {
		t.Fatal(err)
	}
	if err := m.Stage(ctx, so); err != nil {
		t.Fatalf("repeated Stage: %v", err)
	}
	if err := m.CheckEncrypted(ctx, enc.VolumeID, dev); err != nil {
		t.Fatalf("CheckEncrypted while staged: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		t.Fatal(err)
	}
	var mst unix.Stat_t
	if err := unix.Stat(filepath.Join(crypt.MapperDir, name), &mst); err != nil || mst.Rdev != st.Dev {
		t.Fatalf("staging path is not a mount of the mapping (%v)", err)
	}
	canary := strings.Repeat("CSIKIT-FS-CANARY-", 1000)
	if err := os.WriteFile(filepath.Join(target, "canary"), []byte(canary), 0o600); err != nil {
		t.Fatal(err)
	}
	unix.Sync()

	// Online expansion: the backing device grows, then the mapping, then ext4.
	var before, after unix.Statfs_t
	_ = unix.Statfs(target, &before)
	if err := os.Truncate(img, 128<<20); err != nil {
		t.Fatal(err)
	}
	if err := block.RefreshLoopSize(ctx, dev); err != nil {
		t.Fatal(err)
	}
	grew, err := m.Resize(ctx, mount.ResizeOptions{Device: dev, Path: target, Encryption: enc})
	if err != nil || !grew {
		t.Fatalf("Resize = %v, %v", grew, err)
	}
	_ = unix.Statfs(target, &after)
	if after.Blocks*uint64(after.Bsize) < before.Blocks*uint64(before.Bsize)+50<<20 {
		t.Fatalf("file system %d -> %d bytes, want about +64 MiB", before.Blocks*uint64(before.Bsize), after.Blocks*uint64(after.Bsize))
	}

	uo := mount.UnmountOptions{Encryption: enc}
	if err := m.Unstage(ctx, target, uo); err != nil {
		t.Fatal(err)
	}
	if err := m.Unstage(ctx, target, uo); err != nil {
		t.Fatalf("repeated Unstage: %v", err)
	}
	if err := m.CheckEncrypted(ctx, enc.VolumeID, dev); err == nil {
		t.Fatal("CheckEncrypted after unstage: the mapping is still open")
	}
	raw, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("CSIKIT-FS-CANARY")) {
		t.Fatal("plaintext canary found in the raw image")
	}

	hdr := header(t, img)
	wrong := so
	wrong.Encryption = &mount.Encryption{VolumeID: enc.VolumeID, Key: crypt.StaticKey("a \"quoted\"\nkeY")}
	wantCode(t, m.Stage(ctx, wrong), codes.InvalidArgument)
	if !bytes.Equal(hdr, header(t, img)) {
		t.Fatal("a stage with a wrong key changed the header")
	}
	if mounted, _ := m.IsMountPoint(ctx, target); mounted {
		t.Fatal("a stage with a wrong key mounted something")
	}
	if err := m.Stage(ctx, so); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(target, "canary"))
	if err != nil || string(got) != canary {
		t.Fatalf("canary after restage: %v", err)
	}
	if err := m.Unstage(ctx, target, uo); err != nil {
		t.Fatal(err)
	}
}

// TestEncryptedStageRefusesData: a device with a file system is never
// turned into an encrypted volume.
func TestEncryptedStageRefusesData(t *testing.T) {
	if inCryptVM(t) {
		return
	}
	_, dev := loopDevice(t, 64<<20)
	m := encMounter()
	ctx := context.Background()
	target := filepath.Join(t.TempDir(), "plain")
	if err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: target}); err != nil {
		t.Fatal(err)
	}
	if err := m.Unstage(ctx, target, mount.UnmountOptions{}); err != nil {
		t.Fatal(err)
	}
	enc := &mount.Encryption{VolumeID: "v", Key: crypt.StaticKey("k")}
	wantCode(t, m.Stage(ctx, mount.StageOptions{Device: dev, Target: target, Encryption: enc}), codes.FailedPrecondition)
}

//go:build linux && cryptbench

// The benchmarks need dm-crypt, which only the VM lane has here: `make
// bench-crypt` builds them (tag cryptbench) and runs them there. Without
// the tag they are not built, so `go test -bench .` in CI has nothing to
// skip.

package crypt_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/crypt"
	"github.com/csikit/csikit/mount"
)

// benchDevice attaches a loop device over a fresh sparse image of size
// bytes; where there is no dm-crypt it fails, naming `make bench-crypt`.
func benchDevice(b *testing.B, size int64) (dev string) {
	b.Helper()
	if !dmCryptWorks() {
		b.Fatal("no dm-crypt in this kernel: `make bench-crypt` runs these benchmarks in the VM lane")
	}
	img := filepath.Join(b.TempDir(), "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		b.Fatal(err)
	}
	dev, err := block.AttachLoop(context.Background(), img, block.LoopOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = block.DetachLoop(context.Background(), dev) })
	return dev
}

func benchEncryption(b *testing.B, encrypted bool) *mount.Encryption {
	if !encrypted {
		return nil
	}
	return &mount.Encryption{VolumeID: "bench-" + b.Name(), Key: crypt.StaticKey("bench key")}
}

// BenchmarkStageUnstage is one mount.Stage plus one mount.Unstage of an
// ext4 volume already formatted, plain and encrypted (the encrypted one
// opens and closes its mapping; its key slot is PBKDF2 with 1000
// iterations, so the key derivation, 0.1-0.3 s with the default argon2id,
// is not in the figure).
func BenchmarkStageUnstage(b *testing.B) {
	b.Run("plain", benchStage(false))
	b.Run("encrypted", benchStage(true))
}

func benchStage(encrypted bool) func(*testing.B) {
	return func(b *testing.B) {
		{
			dev := benchDevice(b, 64<<20)
			m := encMounter()
			ctx := context.Background()
			target := filepath.Join(b.TempDir(), "staging")
			enc := benchEncryption(b, encrypted)
			o := mount.StageOptions{Device: dev, Target: target, Encryption: enc}
			uo := mount.UnmountOptions{Encryption: enc}
			if err := m.Stage(ctx, o); err != nil { // formats
				b.Fatal(err)
			}
			if err := m.Unstage(ctx, target, uo); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if err := m.Stage(ctx, o); err != nil {
					b.Fatal(err)
				}
				if err := m.Unstage(ctx, target, uo); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// BenchmarkSequentialWrite writes 32 MiB to a file on a staged ext4
// volume and fsyncs it, plain and encrypted on the same kind of device.
func BenchmarkSequentialWrite(b *testing.B) {
	b.Run("plain", benchWrite(false))
	b.Run("encrypted", benchWrite(true))
}

func benchWrite(encrypted bool) func(*testing.B) {
	const size = 32 << 20
	return func(b *testing.B) {
		{
			dev := benchDevice(b, 128<<20)
			m := encMounter()
			ctx := context.Background()
			target := filepath.Join(b.TempDir(), "staging")
			enc := benchEncryption(b, encrypted)
			if err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: target, Encryption: enc}); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = m.Unstage(context.Background(), target, mount.UnmountOptions{Encryption: enc}) })
			buf := make([]byte, 1<<20)
			for i := range buf {
				buf[i] = byte(i * 7)
			}
			b.SetBytes(size)
			b.ResetTimer()
			for range b.N {
				f, err := os.OpenFile(filepath.Join(target, "data"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
				if err != nil {
					b.Fatal(err)
				}
				for off := 0; off < size; off += len(buf) {
					if _, err := f.Write(buf); err != nil {
						b.Fatal(err)
					}
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				f.Close()
				_ = unix.Unlink(filepath.Join(target, "data"))
			}
		}
	}
}

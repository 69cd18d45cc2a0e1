//go:build linux

package fstree_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/csikit/csikit/fstree"
	"google.golang.org/grpc/status"
)

// A directory-backed driver's CreateVolume from a source volume: copy the
// source tree within the new volume's capacity, measure it, and delete a
// volume's tree in DeleteVolume.
func Example() {
	ctx := context.Background()
	state, err := os.MkdirTemp("", "volumes")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(state)
	src := filepath.Join(state, "vol-1")
	if err := os.MkdirAll(filepath.Join(src, "data"), 0o750); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "data", "db"), []byte("rows"), 0o640); err != nil {
		log.Fatal(err)
	}

	// CreateVolume with vol-1 as its source and a 1 MiB capacity.
	stats, err := fstree.Copy(ctx, src, filepath.Join(state, "vol-2"), fstree.CopyOptions{MaxBytes: 1 << 20})
	if err != nil {
		log.Print(status.Code(err)) // OutOfRange when vol-1 holds more than 1 MiB
		return
	}
	fmt.Printf("copied %d files, %d bytes\n", stats.Files, stats.Bytes)

	u, err := fstree.Usage(ctx, filepath.Join(state, "vol-2"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("inodes:", u.Inodes)

	// DeleteVolume: refuses (FailedPrecondition) while anything below is mounted.
	if err := fstree.Remove(ctx, filepath.Join(state, "vol-2"), fstree.RemoveOptions{}); err != nil {
		log.Fatal(err)
	}
	_, err = os.Stat(filepath.Join(state, "vol-2"))
	fmt.Println("removed:", os.IsNotExist(err))
	// Output:
	// copied 1 files, 4 bytes
	// inodes: 3
	// removed: true
}

// A byte budget smaller than the source's data: Copy fails with
// codes.OutOfRange and leaves nothing behind.
func ExampleCopy_budget() {
	ctx := context.Background()
	state, err := os.MkdirTemp("", "volumes")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(state)
	src := filepath.Join(state, "big")
	if err := os.Mkdir(src, 0o750); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "f"), make([]byte, 8192), 0o640); err != nil {
		log.Fatal(err)
	}
	_, err = fstree.Copy(ctx, src, filepath.Join(state, "small"), fstree.CopyOptions{MaxBytes: 4096})
	fmt.Println(status.Code(err))
	_, err = os.Stat(filepath.Join(state, "small"))
	fmt.Println("left behind:", !os.IsNotExist(err))
	// Output:
	// OutOfRange
	// left behind: false
}

// Remove deletes a volume's tree; a symlink in it is removed as a link,
// never followed, so what it points to stays.
func ExampleRemove() {
	ctx := context.Background()
	state, err := os.MkdirTemp("", "volumes")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(state)
	host := filepath.Join(state, "host-file")
	if err := os.WriteFile(host, []byte("keep"), 0o600); err != nil {
		log.Fatal(err)
	}
	vol := filepath.Join(state, "vol-1")
	if err := os.MkdirAll(filepath.Join(vol, "a", "b"), 0o750); err != nil {
		log.Fatal(err)
	}
	if err := os.Symlink(host, filepath.Join(vol, "a", "b", "escape")); err != nil {
		log.Fatal(err)
	}
	if err := fstree.Remove(ctx, vol, fstree.RemoveOptions{}); err != nil {
		log.Fatal(err) // FailedPrecondition naming it when a mount is below
	}
	_, err = os.Stat(vol)
	fmt.Println("volume removed:", os.IsNotExist(err))
	b, _ := os.ReadFile(host)
	fmt.Println("host file:", string(b))
	// Output:
	// volume removed: true
	// host file: keep
}

// Usage counts allocated blocks, so a sparse file's hole is free.
func ExampleUsage() {
	ctx := context.Background()
	vol, err := os.MkdirTemp("", "vol")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(vol)
	if err := os.WriteFile(filepath.Join(vol, "sparse"), nil, 0o600); err != nil {
		log.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(vol, "sparse"), 1<<30); err != nil {
		log.Fatal(err)
	}
	u, err := fstree.Usage(ctx, vol)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("inodes:", u.Inodes, "under 1 MiB:", u.Bytes < 1<<20)
	// Output: inodes: 2 under 1 MiB: true
}

//go:build linux

package block_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/internal/testenv"
)

func attachOpts(t *testing.T, file string, opts block.LoopOptions) string {
	t.Helper()
	dev, err := block.AttachLoop(context.Background(), file, opts)
	if err != nil {
		t.Fatalf("AttachLoop(%+v): %v", opts, err)
	}
	t.Cleanup(func() {
		if err := block.DetachLoop(context.Background(), dev); err != nil {
			t.Errorf("DetachLoop(%s): %v", dev, err)
		}
	})
	return dev
}

// TestLoopOffsetAndSizeLimit attaches two devices on one file at
// different offsets: they are different devices, each the size asked,
// each writing where it should, and each found by its own range only.
func TestLoopOffsetAndSizeLimit(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	file := backingFile(t, 16<<20)
	first := block.LoopOptions{SizeLimit: 4 << 20}
	second := block.LoopOptions{Offset: 8 << 20}
	a := attachOpts(t, file, first)
	b := attachOpts(t, file, second)
	if a == b {
		t.Fatalf("both ranges got %s, want two devices", a)
	}
	for dev, want := range map[string]int64{a: 4 << 20, b: 8 << 20} {
		if got, err := block.DeviceSize(dev); err != nil || got != want {
			t.Fatalf("DeviceSize(%s): got %d, %v, want %d", dev, got, err, want)
		}
	}
	if again, err := block.AttachLoop(ctx, file, first); err != nil || again != a {
		t.Fatalf("AttachLoop(first) again: got %q, %v, want %s", again, err, a)
	}
	for _, c := range []struct {
		off, limit int64
		want       string
	}{{0, 4 << 20, a}, {8 << 20, 0, b}, {0, 0, ""}, {8 << 20, 4 << 20, ""}, {4 << 20, 0, ""}} {
		got, ok, err := block.FindLoopAt(ctx, file, c.off, c.limit)
		if err != nil || ok != (c.want != "") || got != c.want {
			t.Fatalf("FindLoopAt(%d, %d): got %q, %t, %v, want %q", c.off, c.limit, got, ok, err, c.want)
		}
	}
	if _, ok, err := block.FindLoop(ctx, file); err != nil || ok {
		t.Fatalf("FindLoop (whole file): got %t, %v, want not found", ok, err)
	}
	// Each device writes at its own offset in the file.
	for dev, b := range map[string]byte{a: 0xaa, b: 0xbb} {
		f, err := os.OpenFile(dev, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt(bytes.Repeat([]byte{b}, 4096), 0)
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	data := readAll(t, file)
	if data[0] != 0xaa || data[8<<20] != 0xbb || data[4096] != 0 || data[8<<20-1] != 0 {
		t.Fatalf("file bytes 0, 4096, 8M-1, 8M: %#x %#x %#x %#x, want aa 00 00 bb", data[0], data[4096], data[8<<20-1], data[8<<20])
	}
}

func TestLoopRangeRefusals(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	file := backingFile(t, 4<<20)
	for _, c := range []struct {
		opts block.LoopOptions
		want codes.Code
	}{
		{block.LoopOptions{Offset: 100}, codes.InvalidArgument},
		{block.LoopOptions{SizeLimit: 1000}, codes.InvalidArgument},
		{block.LoopOptions{Offset: -512}, codes.InvalidArgument},
		{block.LoopOptions{Offset: 4 << 20}, codes.OutOfRange},
		{block.LoopOptions{Offset: 2 << 20, SizeLimit: 2<<20 + 512}, codes.OutOfRange},
	} {
		dev, err := block.AttachLoop(ctx, file, c.opts)
		if err == nil {
			testenv.Detach(t, dev)
		}
		testenv.WantCode(t, err, c.want)
	}
}

// TestFindLoopAsksOnlyCandidates simulates a loop device whose backing
// file hangs (a FUSE server that stopped answering, where
// LOOP_GET_STATUS64 blocks): the ioctl for it blocks forever. Finding
// another file's device, or a file with none, must not ask it at all
// (its file has another name, so it is no candidate).
func TestFindLoopAsksOnlyCandidates(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	hungFile := filepath.Join(t.TempDir(), "hung.img")
	if err := os.WriteFile(hungFile, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	hung := attachOpts(t, hungFile, block.LoopOptions{})
	otherFile := backingFile(t, 1<<20)
	other := attachOpts(t, otherFile, block.LoopOptions{})
	unattached := backingFile(t, 1<<20)

	release := make(chan struct{})
	var mu sync.Mutex
	var asked []string
	undo := block.WatchLoopStatus(func(dev string) {
		mu.Lock()
		asked = append(asked, dev)
		mu.Unlock()
		if dev == hung {
			<-release
		}
	})
	defer undo()
	defer close(release)

	for file, want := range map[string]string{otherFile: other, unattached: ""} {
		done := make(chan struct{})
		var got string
		var err error
		go func() { got, _, err = block.FindLoop(ctx, file); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("FindLoop(%s) hangs on %s", file, hung)
		}
		if err != nil || got != want {
			t.Fatalf("FindLoop(%s): got %q, %v, want %q", file, got, err, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// other is asked as the candidate for its own file and, having the
	// same base name, for the unattached one; hung never.
	for _, d := range asked {
		if d != other {
			t.Fatalf("LOOP_GET_STATUS64 asked %q, want only the candidate %s", asked, other)
		}
	}
}

// TestFindLoopThroughAnotherPath: a file attached through one path is
// found through a bind mount of its directory (sysfs shows the first
// path), and the device is asked about only as a same-name candidate.
func TestFindLoopThroughAnotherPath(t *testing.T) {
	testenv.RequireLoopDevices(t)
	ctx := context.Background()
	file := backingFile(t, 1<<20)
	dev := attachOpts(t, file, block.LoopOptions{})
	other := filepath.Join(t.TempDir(), "bind")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, "mount", "--bind", filepath.Dir(file), other)
	t.Cleanup(func() { testenv.Unmount(t, other) })
	alias := filepath.Join(other, filepath.Base(file))
	if got, ok, err := block.FindLoop(ctx, alias); err != nil || !ok || got != dev {
		t.Fatalf("FindLoop(%s): got %q, %t, %v, want %s", alias, got, ok, err, dev)
	}
	if again, err := block.AttachLoop(ctx, alias, block.LoopOptions{}); err != nil || again != dev {
		t.Fatalf("AttachLoop(%s): got %q, %v, want the same device %s", alias, again, err, dev)
	}
}

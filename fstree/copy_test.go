//go:build linux

package fstree_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/fstree"
	"github.com/csikit/csikit/internal/testenv"
)

func TestCopyKeepsTypesModesOwnersTimes(t *testing.T) {
	testenv.RequireRoot(t, "chowns files to other users and makes FIFOs")
	ctx := context.Background()
	d := t.TempDir()
	src := filepath.Join(d, "src")
	write(t, filepath.Join(src, "plain"), "plain data", 0o644)
	write(t, filepath.Join(src, "dir/secret"), "only owner", 0o600)
	write(t, filepath.Join(src, "dir/setuid"), "#!/bin/true\n", 0o4755)
	write(t, filepath.Join(src, "dir/sub/empty"), "", 0o640)
	if err := os.Chmod(filepath.Join(src, "dir/sub"), 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(src, "dir/secret"), 1234, 5678); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../nowhere", filepath.Join(src, "dir/dangling")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lchown(filepath.Join(src, "abs-link"), 42, 43); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(src, "fifo"), 0o620); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC)
	if err := os.Chtimes(filepath.Join(src, "plain"), old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "dir"), 0o555); err != nil { // read-only dir with files
		t.Fatal(err)
	}

	dst := filepath.Join(d, "dst")
	stats, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{})
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	want, got := snapshot(t, src), snapshot(t, dst)
	if len(got) != len(want) {
		t.Fatalf("copy has %d entries, want %d: %v", len(got), len(want), got)
	}
	for p, w := range want {
		if g, ok := got[p]; !ok || g != w {
			t.Errorf("%s: got %+v, want %+v", p, g, w)
		}
	}
	wantStats := fstree.CopyStats{Bytes: int64(len("plain data") + len("only owner") + len("#!/bin/true\n")),
		Files: 4, Dirs: 3, Symlinks: 2, Specials: 1}
	if stats != wantStats {
		t.Errorf("stats: got %+v, want %+v", stats, wantStats)
	}
}

func TestCopySparseFile(t *testing.T) {
	ctx := context.Background()
	d := tmpfs(t, "", "64m") // tmpfs keeps holes and answers SEEK_DATA exactly
	src := filepath.Join(d, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(src, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	data := strings.Repeat("x", 4096)
	if _, err := f.WriteAt([]byte(data), 512<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()

	dst := filepath.Join(d, "dst")
	stats, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if stats.Bytes != 4096 {
		t.Errorf("wrote %d bytes, want 4096", stats.Bytes)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dst, "sparse"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 1<<30 {
		t.Errorf("copy size %d, want %d", st.Size, 1<<30)
	}
	if alloc := st.Blocks * 512; alloc > 64<<10 {
		t.Errorf("copy allocates %d bytes, want a sparse file (<= 64 KiB)", alloc)
	}
	g, err := os.Open(filepath.Join(dst, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	buf := make([]byte, 8192)
	if _, err := g.ReadAt(buf, 512<<20-4096); err != nil {
		t.Fatal(err)
	}
	if string(buf[4096:]) != data || strings.Trim(string(buf[:4096]), "\x00") != "" {
		t.Errorf("data around the extent differs")
	}
	u, err := fstree.Usage(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	if u.Bytes > 64<<10 || u.Inodes != 2 {
		t.Errorf("Usage of the copy: got %+v, want <= 64 KiB in 2 inodes", u)
	}
}

func TestCopyBudget(t *testing.T) {
	ctx := context.Background()
	d := t.TempDir()
	src := filepath.Join(d, "src")
	for i := range 3 {
		write(t, filepath.Join(src, "d", string(rune('a'+i))), strings.Repeat("y", 100<<10), 0o644)
	}
	dst := filepath.Join(d, "dst")
	_, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{MaxBytes: 250 << 10})
	testenv.WantCode(t, err, codes.OutOfRange)
	wantMissing(t, dst)
	wantMissing(t, filepath.Join(d, ".dst.fstree-partial"))

	// A destination that existed (empty) stays, and stays empty.
	if err := os.Mkdir(dst, 0o750); err != nil {
		t.Fatal(err)
	}
	_, err = fstree.Copy(ctx, src, dst, fstree.CopyOptions{MaxBytes: 250 << 10})
	testenv.WantCode(t, err, codes.OutOfRange)
	if ents, err := os.ReadDir(dst); err != nil || len(ents) != 0 {
		t.Fatalf("destination after a failed copy: %v, %v; want it empty", ents, err)
	}
	// Exactly the budget is enough.
	stats, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{MaxBytes: 300 << 10})
	if err != nil || stats.Bytes != 300<<10 {
		t.Fatalf("Copy within budget: %+v, %v", stats, err)
	}
	// Not an empty destination any more.
	_, err = fstree.Copy(ctx, src, dst, fstree.CopyOptions{})
	testenv.WantCode(t, err, codes.AlreadyExists)
}

func TestCopyDiskFull(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "src")
	write(t, filepath.Join(src, "small"), "fits", 0o644)
	write(t, filepath.Join(src, "z/big"), strings.Repeat("z", 4<<20), 0o644)
	full := tmpfs(t, "", "1m")
	dst := filepath.Join(full, "dst")
	_, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{})
	testenv.WantCode(t, err, codes.ResourceExhausted)
	wantMissing(t, dst)
	if ents, err := os.ReadDir(full); err != nil || len(ents) != 0 {
		t.Errorf("leftovers on the full file system: %v, %v", ents, err)
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(full, &sfs); err != nil {
		t.Fatal(err)
	}
	if sfs.Bfree != sfs.Blocks {
		t.Errorf("tmpfs has %d of %d blocks used after the failed copy, want none", sfs.Blocks-sfs.Bfree, sfs.Blocks)
	}
}

func TestCopyRefusesMountBelow(t *testing.T) {
	ctx := context.Background()
	d := t.TempDir()
	src := filepath.Join(d, "src")
	write(t, filepath.Join(src, "file"), "data", 0o644)
	mnt := tmpfs(t, filepath.Join(src, "a/mnt"), "1m")
	write(t, filepath.Join(mnt, "inside"), "mounted data", 0o644)
	dst := filepath.Join(d, "dst")
	_, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{})
	testenv.WantCode(t, err, codes.FailedPrecondition)
	mustContain(t, err, mnt)
	wantMissing(t, dst)
}

func TestCopyDeviceNodes(t *testing.T) {
	testenv.RequireRoot(t, "makes a device node")
	ctx := context.Background()
	d := t.TempDir()
	src := filepath.Join(d, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(src, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	_, err := fstree.Copy(ctx, src, filepath.Join(d, "refused"), fstree.CopyOptions{})
	testenv.WantCode(t, err, codes.FailedPrecondition)
	mustContain(t, err, "device node")
	wantMissing(t, filepath.Join(d, "refused"))

	dst := filepath.Join(d, "dst")
	if _, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{CopyDevices: true}); err != nil {
		t.Fatalf("Copy with CopyDevices: %v", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dst, "null"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(1, 3) {
		t.Errorf("copied node: mode %o rdev %d, want a char device 1:3", st.Mode, st.Rdev)
	}
}

func TestCopyErrors(t *testing.T) {
	ctx := context.Background()
	d := t.TempDir()
	write(t, filepath.Join(d, "file"), "x", 0o644)
	if err := os.Symlink(d, filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		src, dst string
		opts     fstree.CopyOptions
		want     codes.Code
	}{
		{"relative source", "src", filepath.Join(d, "a"), fstree.CopyOptions{}, codes.InvalidArgument},
		{"unclean destination", d, d + "/x/../y", fstree.CopyOptions{}, codes.InvalidArgument},
		{"negative budget", d, filepath.Join(d, "b"), fstree.CopyOptions{MaxBytes: -1}, codes.InvalidArgument},
		{"missing source", filepath.Join(d, "missing"), filepath.Join(d, "c"), fstree.CopyOptions{}, codes.NotFound},
		{"symlinked source", filepath.Join(d, "link"), filepath.Join(d, "e"), fstree.CopyOptions{}, codes.InvalidArgument},
		{"file destination", d, filepath.Join(d, "file"), fstree.CopyOptions{}, codes.AlreadyExists},
		{"missing destination parent", d, filepath.Join(d, "no/dst"), fstree.CopyOptions{}, codes.NotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := fstree.Copy(ctx, c.src, c.dst, c.opts)
			testenv.WantCode(t, err, c.want)
		})
	}
	// A destination inside the source is not copied into itself, and the
	// source keeps what it had.
	_, err := fstree.Copy(ctx, d, filepath.Join(d, "inside"), fstree.CopyOptions{})
	testenv.WantCode(t, err, codes.InvalidArgument)
	wantMissing(t, filepath.Join(d, "inside"))
	wantContent(t, filepath.Join(d, "file"), "x")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = fstree.Copy(cctx, d, filepath.Join(d, "cancelled"), fstree.CopyOptions{})
	testenv.WantCode(t, err, codes.Canceled)
}

// TestCopySymlinkSwapRace swaps a regular file for a symlink to a secret
// host file, and a directory for a symlink to a secret host directory, as
// fast as it can while copies run. No copy may ever hold the secret's
// bytes: each entry is opened without following symlinks and copied as
// what the open found.
func TestCopySymlinkSwapRace(t *testing.T) {
	ctx := context.Background()
	d := t.TempDir()
	secret := []byte("TOP-SECRET-host-data-\x00-do-not-copy")
	secretDir := filepath.Join(d, "host")
	write(t, filepath.Join(secretDir, "key"), string(secret), 0o600)
	src := filepath.Join(d, "src")
	write(t, filepath.Join(src, "f"), "public", 0o644)
	write(t, filepath.Join(src, "d/inner"), "public inner", 0o644)
	write(t, filepath.Join(src, "stage/f.reg"), "public", 0o644)
	write(t, filepath.Join(src, "stage/d.dir/inner"), "public inner", 0o644)
	stage := filepath.Join(src, "stage")
	if err := os.Symlink(filepath.Join(secretDir, "key"), filepath.Join(stage, "f.lnk")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secretDir, filepath.Join(stage, "d.lnk")); err != nil {
		t.Fatal(err)
	}

	// The attacker: exchange the two names atomically (renameat2
	// RENAME_EXCHANGE), so each name is always there, once as the real
	// entry and once as a symlink to the secret.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var swaps atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			for _, p := range [][2]string{{"f", "stage/f.lnk"}, {"d", "stage/d.lnk"}} {
				if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(src, p[0]), unix.AT_FDCWD, filepath.Join(src, p[1]), unix.RENAME_EXCHANGE); err != nil {
					t.Errorf("exchange: %v", err)
					return
				}
				swaps.Add(1)
			}
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()

	deadline := time.Now().Add(5 * time.Second)
	n := 0
	for ; n < 400 && time.Now().Before(deadline); n++ {
		dst := filepath.Join(d, "dst")
		_, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{})
		if err != nil {
			t.Fatalf("copy %d: %v", n, err)
		}
		if p := containsSecret(t, dst, secret); p != "" {
			t.Fatalf("copy %d: %s holds the secret", n, p)
		}
		if err := os.RemoveAll(dst); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d copies during %d swaps", n, swaps.Load())
	if n < 20 || swaps.Load() < 100 {
		t.Fatalf("only %d copies during %d swaps: the race was not exercised", n, swaps.Load())
	}
}

// TestCopyRefusesBindMounts: a host file bind-mounted onto a file of the
// source and a same-filesystem directory bind-mounted into it (neither
// shows in device numbers) are refused, nothing is left at dst, and the
// host file is neither copied out nor changed.
func TestCopyRefusesBindMounts(t *testing.T) {
	bindMountCases(t, func(t *testing.T, root, target, host string) {
		dst := root + "-copy"
		_, err := fstree.Copy(context.Background(), root, dst, fstree.CopyOptions{})
		testenv.WantCode(t, err, codes.FailedPrecondition)
		mustContain(t, err, target)
		wantMissing(t, dst)
		wantContent(t, filepath.Join(host, "secret"), "host key")
	})
}

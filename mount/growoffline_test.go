//go:build linux

package mount_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/mount"
)

func requireE2fsprogs(t *testing.T) {
	t.Helper()
	for _, c := range []string{"mkfs.ext4", "e2fsck", "resize2fs", "debugfs", "dumpe2fs"} {
		requireTool(t, c, "e2fsprogs")
	}
}

// extImage makes an ext4 image of size bytes at path holding the file
// "data" ("precious"), made with mkfs's extra args.
func extImage(t *testing.T, path string, size int64, args ...string) {
	t.Helper()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "data"), "precious")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	args = append(append([]string{"-q", "-F", "-m0", "-d", src}, args...), path)
	if out, err := exec.Command("mkfs.ext4", args...).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %s: %v\n%s", args, err, out)
	}
}

// extBytes is the size of the ext file system in img, read by dumpe2fs.
func extBytes(t *testing.T, img string) int64 {
	t.Helper()
	out, err := exec.Command("dumpe2fs", "-h", img).Output()
	if err != nil {
		t.Fatalf("dumpe2fs -h %s: %v", img, err)
	}
	var count, bs int64
	for _, line := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "Block count":
			count = atoi(t, v)
		case "Block size":
			bs = atoi(t, v)
		}
	}
	return count * bs
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range strings.TrimSpace(s) {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// checkImage runs a read-only full check of img and reads "data" back with
// debugfs; the journal must still be there.
func checkImage(t *testing.T, img string) {
	t.Helper()
	if out, err := exec.Command("e2fsck", "-f", "-n", img).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -f -n %s: %v\n%s", img, err, out)
	}
	out, err := exec.Command("debugfs", "-R", "cat /data", img).Output()
	if err != nil || string(out) != "precious" {
		t.Errorf("the file in %s: got %q (%v), want %q", img, out, err, "precious")
	}
	if out, err := exec.Command("dumpe2fs", "-h", img).Output(); err != nil || !strings.Contains(string(out), "has_journal") {
		t.Errorf("%s lost its journal (%v)", img, err)
	}
}

// smallTmpfs mounts a tmpfs of size at a new directory and unmounts it
// when the test ends.
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	requireRoot(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	cleanupMounts(t, dir)
	return dir
}

// fill writes dir's file system full and returns the file holding it.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	return p
}

func TestGrowOffline(t *testing.T) {
	requireRoot(t)
	requireE2fsprogs(t)
	ctx := context.Background()
	m := mount.New(mount.Options{})
	img := filepath.Join(t.TempDir(), "vol.img")
	extImage(t, img, 16<<20)
	before := extBytes(t, img)
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	res, err := m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: img})
	if err != nil {
		t.Fatal(err)
	}
	if res.Before != before || res.After != 64<<20 || extBytes(t, img) != 64<<20 {
		t.Errorf("GrowOffline: got %+v (dumpe2fs %d), want %d → %d", res, extBytes(t, img), before, 64<<20)
	}
	checkImage(t, img)
	// Full size already: nothing to do.
	if res, err := m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: img}); err != nil || res.Before != res.After {
		t.Errorf("GrowOffline again: got %+v, %v, want nothing done", res, err)
	}

	t.Run("attached", func(t *testing.T) {
		if err := os.Truncate(img, 96<<20); err != nil {
			t.Fatal(err)
		}
		dev := attachLoop(t, img)
		_, err := m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: img})
		wantCode(t, err, codes.FailedPrecondition)
		if !strings.Contains(err.Error(), dev) {
			t.Errorf("error %q does not name %s", err, dev)
		}
		// The device itself, not mounted, grows.
		if _, err := m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: dev}); err != nil {
			t.Fatalf("GrowOffline(%s): %v", dev, err)
		}
		staging := filepath.Join(t.TempDir(), "staging")
		cleanupMounts(t, staging)
		if err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: staging}); err != nil {
			t.Fatal(err)
		}
		if got := fsSize(t, staging); got < 85<<20 {
			t.Errorf("staged after growing %s: %d bytes, want about %d", dev, got, 96<<20)
		}
		_, err = m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: dev})
		if err != nil { // full size: nothing to do, mounted or not
			t.Errorf("GrowOffline of the mounted device at full size: %v", err)
		}
		if err := os.Truncate(img, 128<<20); err != nil {
			t.Fatal(err)
		}
		if err := block.RefreshLoopSize(ctx, dev); err != nil {
			t.Fatal(err)
		}
		_, err = m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: dev})
		wantCode(t, err, codes.FailedPrecondition)
		if err := m.Unstage(ctx, staging, mount.UnmountOptions{}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("not a file", func(t *testing.T) {
		_, err := m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: filepath.Dir(img)})
		wantCode(t, err, codes.InvalidArgument)
		_, err = m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: img + ".missing"})
		wantCode(t, err, codes.NotFound)
		_, err = m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: "vol.img"})
		wantCode(t, err, codes.InvalidArgument)
	})
}

// TestGrowOfflineCancelled: the call's context ends while resize2fs is
// writing the new groups of a file system made without a resize inode
// (resize2fs then moves metadata: a run killed there left e2fsck -p
// refusing the file system, and e2fsck -y dropping its journal). resize2fs
// is let finish: the call answers CANCELED, the file system has grown,
// checks clean, and keeps its journal and data.
func TestGrowOfflineCancelled(t *testing.T) {
	requireRoot(t)
	requireE2fsprogs(t)
	img := filepath.Join(t.TempDir(), "vol.img")
	extImage(t, img, 64<<20, "-b", "4096", "-O", "^resize_inode")
	const size = 1 << 40
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	var cancelled bool
	run := mount.ExecRunner()
	m := mount.New(mount.Options{Runner: mount.RunnerFunc(func(rctx context.Context, name string, args ...string) ([]byte, error) {
		if name == "resize2fs" {
			// Cancel once resize2fs has written 5 MiB of new metadata.
			wg.Add(1)
			done := make(chan struct{})
			defer close(done)
			go func() {
				defer wg.Done()
				for {
					var now unix.Stat_t
					if unix.Stat(img, &now) == nil && now.Blocks > st.Blocks+10240 {
						cancelled = true
						cancel()
						return
					}
					select {
					case <-done:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
		}
		return run.Run(rctx, name, args...)
	})})
	res, err := m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: img})
	wg.Wait()
	if !cancelled {
		t.Fatalf("resize2fs finished before it wrote 5 MiB (%v): the test did not cancel it", err)
	}
	wantCode(t, err, codes.Canceled)
	if res.After != size || extBytes(t, img) != size {
		t.Errorf("after the cancelled call: got %+v, dumpe2fs %d bytes, want grown to %d", res, extBytes(t, img), int64(size))
	}
	checkImage(t, img)
}

// TestGrowOfflineFullDisk: an image on a full tmpfs cannot take the new
// groups' metadata. The call answers RESOURCE_EXHAUSTED naming the full
// file system, the file system keeps its size and checks clean, and once
// space is freed the same call grows it. Staged with Grow through a loop
// device (whose writes to the full file fail with EIO, not ENOSPC), the
// answer is the same.
func TestGrowOfflineFullDisk(t *testing.T) {
	requireE2fsprogs(t)
	dir := smallTmpfs(t, "24m")
	ctx := context.Background()
	m := mount.New(mount.Options{})
	img := filepath.Join(dir, "vol.img")
	extImage(t, img, 16<<20)
	before := extBytes(t, img)
	if err := os.Truncate(img, 4<<30); err != nil {
		t.Fatal(err)
	}
	filler := fill(t, dir)
	res, err := m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: img})
	wantCode(t, err, codes.ResourceExhausted)
	t.Log(err)
	if !strings.Contains(err.Error(), "full") {
		t.Errorf("error %q does not say the disk is full", err)
	}
	if res.After != before || extBytes(t, img) != before {
		t.Errorf("after the failed grow: got %+v, dumpe2fs %d, want %d kept", res, extBytes(t, img), before)
	}
	checkImage(t, img)

	t.Run("stage", func(t *testing.T) {
		dev := attachLoop(t, img)
		staging := filepath.Join(t.TempDir(), "staging")
		cleanupMounts(t, staging)
		err := m.Stage(ctx, mount.StageOptions{Device: dev, Target: staging, Grow: true})
		wantCode(t, err, codes.ResourceExhausted)
		t.Log(err)
		if mounted(staging) {
			t.Errorf("%s mounted after the failed stage", staging)
		}
		if err := block.DetachLoop(ctx, dev); err != nil {
			t.Fatal(err)
		}
		checkImage(t, img)
	})

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if res, err := m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: img}); err != nil || res.After != 4<<30 {
		t.Fatalf("GrowOffline with space again: %+v, %v", res, err)
	}
	checkImage(t, img)
}

// TestGrowOfflineSymlink: a symlink in the image's path is refused, and
// one swapped in for the image while the tools run (here between e2fsck
// and resize2fs) does not redirect them: the image opened grows, the
// file the symlink points to is untouched.
func TestGrowOfflineSymlink(t *testing.T) {
	requireRoot(t)
	requireE2fsprogs(t)
	ctx := context.Background()
	dir := t.TempDir()
	img, victim := filepath.Join(dir, "vol.img"), filepath.Join(dir, "other.img")
	extImage(t, img, 16<<20)
	extImage(t, victim, 16<<20)
	small := extBytes(t, victim)
	for _, p := range []string{img, victim} {
		if err := os.Truncate(p, 64<<20); err != nil {
			t.Fatal(err)
		}
	}
	m := mount.New(mount.Options{})

	link := filepath.Join(dir, "link.img")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	_, err := m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: link})
	wantCode(t, err, codes.FailedPrecondition)
	linkDir := filepath.Join(t.TempDir(), "images")
	if err := os.Symlink(dir, linkDir); err != nil {
		t.Fatal(err)
	}
	_, err = m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: filepath.Join(linkDir, "other.img")})
	wantCode(t, err, codes.FailedPrecondition)
	if got := extBytes(t, victim); got != small {
		t.Fatalf("the symlinks' target grew: %d bytes, want %d", got, small)
	}

	moved := filepath.Join(dir, "moved.img")
	run := mount.ExecRunner()
	m = mount.New(mount.Options{Runner: mount.RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if name == "resize2fs" {
			if err := os.Rename(img, moved); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(victim, img); err != nil {
				t.Error(err)
			}
		}
		return run.Run(ctx, name, args...)
	})})
	if _, err := m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: img}); err != nil {
		t.Fatal(err)
	}
	if got := extBytes(t, victim); got != small {
		t.Errorf("the file swapped in grew: %d bytes, want %d", got, small)
	}
	if got := extBytes(t, moved); got != 64<<20 {
		t.Errorf("the image opened: %d bytes, want %d", got, 64<<20)
	}
	checkImage(t, moved)
	checkImage(t, victim)
}

// TestStageFormatFullDisk: mkfs on a loop device whose backing file sits
// on a full tmpfs fails (EIO from the loop device); Stage answers
// RESOURCE_EXHAUSTED saying the storage is full, not INTERNAL.
func TestStageFormatFullDisk(t *testing.T) {
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	dir := smallTmpfs(t, "4m")
	ctx := context.Background()
	img := filepath.Join(dir, "vol.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	dev := attachLoop(t, img)
	fill(t, dir)
	staging := filepath.Join(t.TempDir(), "staging")
	cleanupMounts(t, staging)
	err := mount.New(mount.Options{}).Stage(ctx, mount.StageOptions{Device: dev, Target: staging})
	wantCode(t, err, codes.ResourceExhausted)
	t.Log(err)
	if !strings.Contains(err.Error(), "full") || !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q does not say that %s is full", err, dir)
	}
}

// TestGrowOfflineScripted covers the answers that need no real failure,
// with the tools scripted on a real image: a deadline passing during
// resize2fs (let finish on a context of its own: DEADLINE_EXCEEDED after
// it), and a failed resize2fs whose repair fails too (INTERNAL naming
// the command to run by hand).
func TestGrowOfflineScripted(t *testing.T) {
	requireTool(t, "mkfs.ext4", "e2fsprogs")
	img := filepath.Join(t.TempDir(), "vol.img")
	extImage(t, img, 16<<20)
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}

	t.Run("deadline", func(t *testing.T) {
		s := &script{reply: map[string]func([]string) ([]byte, error){
			"e2fsck": func([]string) ([]byte, error) { return nil, nil },
		}}
		var toolCtxErr error
		m := newMounter(mount.RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
			if name == "resize2fs" {
				time.Sleep(100 * time.Millisecond) // past the call's deadline
				toolCtxErr = ctx.Err()
				return nil, nil
			}
			return s.Run(ctx, name, args...)
		}))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := m.GrowOffline(ctx, mount.GrowOfflineOptions{Path: img})
		wantCode(t, err, codes.DeadlineExceeded)
		if toolCtxErr != nil {
			t.Errorf("resize2fs's context ended with the call's: %v", toolCtxErr)
		}
	})

	t.Run("repair fails", func(t *testing.T) {
		s := &script{reply: map[string]func([]string) ([]byte, error){
			"e2fsck": func(args []string) ([]byte, error) {
				if args[1] == "-y" {
					return []byte("e2fsck: Bad magic number in super-block\n"), &mount.ExitError{Command: "e2fsck", Code: 8}
				}
				return nil, nil
			},
			"resize2fs": func([]string) ([]byte, error) {
				return []byte("resize2fs: Invalid argument while trying to resize\n"), &mount.ExitError{Command: "resize2fs", Code: 1}
			},
		}}
		_, err := newMounter(s).GrowOffline(context.Background(), mount.GrowOfflineOptions{Path: img})
		wantCode(t, err, codes.Internal)
		if !strings.Contains(err.Error(), "e2fsck -f -y "+img) || !strings.Contains(err.Error(), "Invalid argument") {
			t.Errorf("error %q does not name resize2fs's reason and the repair to run", err)
		}
	})
}

// killResize2fs runs resize2fs args and kills it (SIGKILL: the node's OOM
// killer, a crash) once it has written 1 MiB into img. It lets resize2fs
// run in slices of about a millisecond (SIGCONT, SIGSTOP) and looks at
// img between them, so that on a loaded machine, where a poll may come
// late, the kill still lands part way rather than after the last write.
func killResize2fs(t *testing.T, img string, args ...string) error {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("resize2fs", args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	_ = unix.Kill(pid, unix.SIGSTOP)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		waitStopped(t, pid, done)
		var now unix.Stat_t
		if unix.Stat(img, &now) == nil && now.Blocks > st.Blocks+2048 {
			_ = unix.Kill(pid, unix.SIGKILL)
			break
		}
		_ = unix.Kill(pid, unix.SIGCONT)
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("resize2fs finished before it wrote 1 MiB: the test did not kill it")
			}
			return err
		case <-time.After(time.Millisecond):
		}
		_ = unix.Kill(pid, unix.SIGSTOP)
	}
	err := <-done
	if err == nil {
		t.Fatal("resize2fs finished although it was killed")
	}
	return err
}

// waitStopped waits until process pid is stopped (state T in
// /proc/PID/stat) or has exited.
func waitStopped(t *testing.T, pid int, done chan error) {
	t.Helper()
	for range 5000 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return // reaped
		}
		// The state follows the command name in parentheses.
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && len(b) > i+2 && (b[i+2] == 'T' || b[i+2] == 'Z') {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatalf("resize2fs (pid %d) did not stop", pid)
}

// TestGrowOfflineKilledWithUndo: resize2fs killed part way growing a file
// system without a resize inode (where, repaired by e2fsck -f -y alone,
// the file system lost its files) is rolled back from its undo file
// (GrowOfflineOptions.UndoDir): the call answers INTERNAL and the file
// system keeps its size, its data and checks clean. An undo file left by
// a run killed outside any call (a crash) is rolled back by the next call,
// which then grows the file system.
func TestGrowOfflineKilledWithUndo(t *testing.T) {
	requireRoot(t)
	requireE2fsprogs(t)
	requireTool(t, "e2undo", "e2fsprogs")
	const size = 1 << 40
	undoDir := t.TempDir()
	newImage := func() (img string, before int64) {
		img = filepath.Join(t.TempDir(), "vol.img")
		extImage(t, img, 64<<20, "-b", "4096", "-O", "^resize_inode")
		before = extBytes(t, img)
		if err := os.Truncate(img, size); err != nil {
			t.Fatal(err)
		}
		return img, before
	}
	undoFiles := func() []string {
		t.Helper()
		m, _ := filepath.Glob(filepath.Join(undoDir, "*"))
		return m
	}

	t.Run("resize inode", func(t *testing.T) {
		// mkfs.ext4's default: resize2fs -z would leave its resize inode
		// invalid, so none is kept, and the file system checks clean.
		img := filepath.Join(t.TempDir(), "vol.img")
		extImage(t, img, 16<<20)
		if err := os.Truncate(img, 512<<20); err != nil {
			t.Fatal(err)
		}
		res, err := mount.New(mount.Options{}).GrowOffline(context.Background(), mount.GrowOfflineOptions{Path: img, UndoDir: undoDir})
		if err != nil || res.After != 512<<20 {
			t.Fatalf("GrowOffline: %+v, %v", res, err)
		}
		checkImage(t, img)
	})

	t.Run("killed in the call", func(t *testing.T) {
		img, before := newImage()
		run := mount.ExecRunner()
		m := mount.New(mount.Options{Runner: mount.RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
			if name == "resize2fs" {
				return nil, killResize2fs(t, img, args...)
			}
			return run.Run(ctx, name, args...)
		})})
		res, err := m.GrowOffline(context.Background(), mount.GrowOfflineOptions{Path: img, UndoDir: undoDir})
		wantCode(t, err, codes.Internal)
		if res.After != before || extBytes(t, img) != before {
			t.Errorf("after the killed grow: got %+v, dumpe2fs %d, want %d kept", res, extBytes(t, img), before)
		}
		checkImage(t, img)
		if f := undoFiles(); len(f) != 0 {
			t.Errorf("undo files left: %q", f)
		}
	})

	t.Run("killed before the call", func(t *testing.T) {
		img, _ := newImage()
		var st unix.Stat_t
		if err := unix.Stat(img, &st); err != nil {
			t.Fatal(err)
		}
		undo := filepath.Join(undoDir, fmt.Sprintf("%d-%d.e2undo", st.Dev, st.Ino))
		killResize2fs(t, img, "-z", undo, img)
		m := mount.New(mount.Options{})
		res, err := m.GrowOffline(context.Background(), mount.GrowOfflineOptions{Path: img, UndoDir: undoDir})
		if err != nil {
			t.Fatal(err)
		}
		if res.After != size || extBytes(t, img) != size {
			t.Errorf("after the grow: got %+v, dumpe2fs %d, want %d", res, extBytes(t, img), int64(size))
		}
		checkImage(t, img)
		if f := undoFiles(); len(f) != 0 {
			t.Errorf("undo files left: %q", f)
		}
	})
}

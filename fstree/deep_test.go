//go:build linux

package fstree_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/fstree"
	"github.com/csikit/csikit/internal/testenv"
)

// deepEnv asks a child process of TestWalksDeeperThanDescriptorLimit to
// lower its descriptor limit and run one walk: "op\nsrc\ndst".
const deepEnv = "FSTREE_TEST_DEEP_CHILD"

// deepNofile is the child's RLIMIT_NOFILE: far below the depth of the
// tree it walks.
const deepNofile = 64

// deepChild runs a walk for the parent test when deepEnv is set, with the
// descriptor limit lowered (in a process of its own: the limit is
// process-wide), and prints what the walk returned as JSON.
func deepChild() bool {
	v := os.Getenv(deepEnv)
	if v == "" {
		return false
	}
	parts := strings.Split(v, "\n")
	lim := syscall.Rlimit{Cur: deepNofile, Max: deepNofile}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	var out any
	var err error
	switch parts[0] {
	case "copy":
		out, err = fstree.Copy(ctx, parts[1], parts[2], fstree.CopyOptions{})
	case "usage":
		out, err = fstree.Usage(ctx, parts[1])
	case "remove":
		err = fstree.Remove(ctx, parts[1], fstree.RemoveOptions{})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
	os.Exit(0)
	return true
}

// runDeepChild runs one walk in a child process with RLIMIT_NOFILE at
// deepNofile and decodes its result into out (when not nil).
func runDeepChild(t *testing.T, out any, args ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), deepEnv+"="+strings.Join(args, "\n"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s with RLIMIT_NOFILE=%d: %v: %s", args[0], deepNofile, err, stderr.String())
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %q: %v", args[0], b, err)
		}
	}
}

// mkChain makes depth nested directories named "d" below root, by
// descriptor (the path soon exceeds PATH_MAX), with a file "f" holding
// "level N" at every 100th level and at the bottom.
func mkChain(t testing.TB, root string, depth int) {
	t.Helper()
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= depth; i++ {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		nfd, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = nfd
		if i%100 == 0 || i == depth {
			ffd, err := unix.Openat(fd, "f", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			_, err = unix.Write(ffd, []byte(fmt.Sprintf("level %d", i)))
			unix.Close(ffd)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	unix.Close(fd)
}

// TestWalksDeeperThanDescriptorLimit walks a chain of directories far
// deeper than the process may open descriptors (a tree any tenant can
// make): Copy, Usage and Remove must each succeed, where holding a
// descriptor per level failed with "too many open files" every time and
// left the volume undeletable.
func TestWalksDeeperThanDescriptorLimit(t *testing.T) {
	const depth = 1000
	d := t.TempDir()
	// The case first: a volume a tenant made that way.
	victim := filepath.Join(d, "victim")
	mkChain(t, victim, depth)
	runDeepChild(t, nil, "remove", victim)
	wantMissing(t, victim)

	src, dst := filepath.Join(d, "src"), filepath.Join(d, "dst")
	mkChain(t, src, depth)
	var stats fstree.CopyStats
	runDeepChild(t, &stats, "copy", src, dst)
	if stats.Dirs != depth+1 || stats.Files != depth/100 {
		t.Fatalf("Copy stats %+v, want %d dirs and %d files", stats, depth+1, depth/100)
	}
	if got, want := snapshot(t, dst), snapshot(t, src); !reflect.DeepEqual(got, want) {
		t.Fatalf("the copy differs from its source (%d entries, want %d)", len(got), len(want))
	}
	var u fstree.UsageStats
	runDeepChild(t, &u, "usage", dst)
	if u.Inodes != depth+1+depth/100 {
		t.Fatalf("Usage counted %d inodes, want %d", u.Inodes, depth+1+depth/100)
	}
	runDeepChild(t, nil, "remove", dst)
	wantMissing(t, dst)
	runDeepChild(t, nil, "remove", src)
	wantMissing(t, src)
}

// TestCopyRefusesTooDeep: a source deeper than Copy's depth limit is
// refused with FailedPrecondition and leaves nothing at dst, and Remove
// and Usage still walk it (its paths are far beyond PATH_MAX).
func TestCopyRefusesTooDeep(t *testing.T) {
	const depth = 16385
	d := tmpfs(t, "", "256m") // 16,385 directories are made faster there
	src, dst := filepath.Join(d, "src"), filepath.Join(d, "dst")
	mkChain(t, src, depth)
	ctx := context.Background()
	_, err := fstree.Copy(ctx, src, dst, fstree.CopyOptions{})
	testenv.WantCode(t, err, codes.FailedPrecondition)
	mustContain(t, err, "more than 16384 directories deep")
	wantMissing(t, dst)
	wantMissing(t, filepath.Join(d, ".dst.fstree-partial"))
	u, err := fstree.Usage(ctx, src)
	if err != nil || u.Inodes != depth+1+depth/100+1 {
		t.Fatalf("Usage: %+v, %v; want %d inodes", u, err, depth+1+depth/100+1)
	}
	if err := fstree.Remove(ctx, src, fstree.RemoveOptions{}); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	wantMissing(t, src)
}

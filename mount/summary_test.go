//go:build linux

package mount_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csikit/csikit/mount"
)

// TestSummarizeRealTools runs each tool the SDK runs into a real failure
// through ExecRunner and checks the summary of its streams is the tool's
// reason.
func TestSummarizeRealTools(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	file := func(name string, size int64, fill byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Repeat(string(rune(fill)), int(min(size, 1<<20)))), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "missing")
	tiny := file("tiny.img", 10<<10, 0)
	small := file("small.img", 64<<20, 0)
	garbageDev, _ := loopDevice(t, 1<<20)
	if err := os.WriteFile(garbageDev, []byte(strings.Repeat("\x5a", 1<<20)), 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool, pkg string
		args      []string
		want      string
	}{
		{"mkfs.ext4", "e2fsprogs", []string{"-F", missing}, "The file " + missing + " does not exist and no size was specified."},
		{"mkfs.ext4", "e2fsprogs", []string{"-F", tiny}, tiny + ": Not enough space to build proposed filesystem while setting up superblock"},
		{"mkfs.xfs", "xfsprogs", []string{"-f", small}, "Filesystem must be larger than 300MB."},
		{"xfs_growfs", "xfsprogs", []string{"-d", dir}, "xfs_growfs: " + dir + " is not a mounted XFS filesystem"},
		{"fsck", "util-linux", []string{"-t", "ext4", "-a", garbageDev}, "fsck.ext4: Bad magic number in super-block while trying to open " + garbageDev},
		{"resize2fs", "e2fsprogs", []string{small}, "resize2fs: Bad magic number in super-block while trying to open " + small},
		{"blkid", "util-linux", []string{"-p", missing}, ""}, // exit status 2, silent
		{"losetup", "util-linux", []string{"-f", "--show", missing}, "losetup: " + missing + ": failed to set up loop device: No such file or directory"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			requireTool(t, tc.tool, tc.pkg)
			_, err := mount.ExecRunner().Run(context.Background(), tc.tool, tc.args...)
			var ee *mount.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("%s %q: got %v, want an *ExitError", tc.tool, tc.args, err)
			}
			if got := mount.Summarize(ee.Stdout, ee.Stderr); got != tc.want {
				t.Fatalf("%s %q: summary %q, want %q\nstdout:\n%s\nstderr:\n%s", tc.tool, tc.args, got, tc.want, ee.Stdout, ee.Stderr)
			}
		})
	}
}

// TestSummarizeRecorded checks the summary of outputs recorded from tools
// this machine cannot run (rbd needs a Ceph cluster, cryptsetup needs
// device-mapper), and the rules on edge cases.
func TestSummarizeRecorded(t *testing.T) {
	for _, tc := range []struct {
		name           string
		stdout, stderr string
		want           string
	}{
		// rbd map on a kernel without the image's features, as quoted in
		// github.com/ceph/ceph-csi/issues/2397: two lines, both needed.
		{"rbd map", "", "rbd: sysfs write failed\nrbd: map failed: (5) Input/output error\n",
			"rbd: sysfs write failed; rbd: map failed: (5) Input/output error"},
		// cryptsetup open with a wrong key, as quoted in
		// github.com/glv2/bruteforce-luks/issues/32.
		{"cryptsetup open", "", "No key available with this passphrase.\n", "No key available with this passphrase."},
		// resize2fs without CAP_SYS_RESOURCE (e2fsprogs 1.47.0, this machine).
		{"resize2fs", "Filesystem at /dev/loop0 is mounted on /mnt; on-line resizing required\nold_desc_blocks = 1, new_desc_blocks = 1\n",
			"resize2fs 1.47.0 (5-Feb-2023)\nresize2fs: Permission denied to resize filesystem\n",
			"resize2fs: Permission denied to resize filesystem"},
		{"stdout only: its last line", "fsck from util-linux 2.38.1\nchecking\n\ngave up\n\n", "", "gave up"},
		{"banners only", "mkfs.xfs version 6.1.0\n", "mke2fs 1.47.0 (5-Feb-2023)\n\n", ""},
		{"usage only", "", "Usage: tool [-f]\n  -f  force\n", ""},
		{"silent", "", "", ""},
		{"long", "", strings.Repeat("x", 1000), strings.Repeat("x", 300) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mount.Summarize([]byte(tc.stdout), []byte(tc.stderr)); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestResizeSummarizesCombinedOutput checks a Runner that returns only
// combined output (an *ExitError without Stdout and Stderr, as a custom
// Runner may): the message takes the last meaningful line before any usage
// text.
func TestResizeSummarizesCombinedOutput(t *testing.T) {
	out := []byte("Filesystem must be larger than 300MB.\nUsage: mkfs.xfs\n/* blocksize */\t\t[-b size=num]\n")
	dev, _ := loopDevice(t, 16<<20)
	m := newMounter(mount.RunnerFunc(func(ctx context.Context, name string, args ...string) ([]byte, error) {
		if name == "blkid" {
			return nil, &mount.ExitError{Command: name, Code: 2}
		}
		return out, &mount.ExitError{Command: name, Code: 1, Output: out}
	}))
	err := m.Stage(context.Background(), mount.StageOptions{Device: dev, Target: t.TempDir(), FSType: "xfs"})
	if want := ": Filesystem must be larger than 300MB.: "; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v: want it to hold %q", err, want)
	}
}

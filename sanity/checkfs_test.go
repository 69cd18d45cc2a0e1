//go:build linux

package sanity_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/sanity"
)

// CheckFilesystem passes clean ext4 and xfs images, reports a damaged
// one with the tool's words, and refuses what it cannot check. It never
// repairs: the damaged image stays damaged.
func TestCheckFilesystem(t *testing.T) {
	for _, c := range []string{"mkfs.ext4", "debugfs", "e2fsck", "mkfs.xfs", "xfs_repair", "blkid"} {
		testenv.RequireCommand(t, c, "e2fsprogs, xfsprogs, util-linux")
	}
	ctx := context.Background()
	dir := t.TempDir()
	img := func(name string, size int64, mkfs ...string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		if len(mkfs) > 0 {
			if out, err := exec.Command(mkfs[0], append(mkfs[1:], p)...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", mkfs[0], err, out)
			}
		}
		return p
	}
	ext4 := img("ext4.img", 32<<20, "mkfs.ext4", "-q", "-F")
	xfs := img("xfs.img", 320<<20, "mkfs.xfs", "-q", "-f")
	for _, p := range []string{ext4, xfs} {
		if err := sanity.CheckFilesystem(ctx, p); err != nil {
			t.Errorf("CheckFilesystem(clean %s): %v", filepath.Base(p), err)
		}
	}
	// The root directory's link count made wrong.
	if out, err := exec.Command("debugfs", "-w", "-R", "set_inode_field <2> links_count 9", ext4).CombinedOutput(); err != nil {
		t.Fatalf("debugfs: %v\n%s", err, out)
	}
	for range 2 { // -n: the second check finds the same damage
		err := sanity.CheckFilesystem(ctx, ext4)
		if err == nil || !strings.Contains(err.Error(), "e2fsck") || !strings.Contains(err.Error(), "found errors") {
			t.Fatalf("CheckFilesystem(damaged ext4) = %v, want e2fsck's errors", err)
		}
		if !strings.Contains(err.Error(), "ref count is 9") {
			t.Fatalf("CheckFilesystem(damaged ext4) = %v, want the finding itself", err)
		}
	}
	blank := img("blank.img", 1<<20)
	if err := sanity.CheckFilesystem(ctx, blank); err == nil {
		t.Fatal("CheckFilesystem(blank image) = nil, want an error: there is no filesystem to check")
	}
}

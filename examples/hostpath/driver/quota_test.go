//go:build linux

package driver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/csikit/csikit/block"
	"github.com/csikit/csikit/csitest"
	"github.com/csikit/csikit/csitest/vmtest"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/quota"
)

// inQuotaVM runs the calling test in a VM on Debian's kernel (vmtest)
// when this kernel was provably built without what project quotas on xfs
// and ext4 need; true means it ran there and the caller returns.
func inQuotaVM(t *testing.T) bool {
	t.Helper()
	if vmtest.KernelLacks("CONFIG_QUOTA", "CONFIG_XFS_QUOTA", "CONFIG_QFMT_V2") {
		return vmtest.Delegate(t, vmOptions)
	}
	return false
}

// quotaFS makes fstype on a loop device and mounts it with opts; undone at
// cleanup. ext4 gets the project and quota features. It skips when the
// kernel provably cannot mount it so.
func quotaFS(t *testing.T, fstype, opts string) string {
	t.Helper()
	needRoot(t)
	csitest.RequireCommand(t, "mkfs."+fstype, map[string]string{"xfs": "xfsprogs", "ext4": "e2fsprogs"}[fstype])
	if opts != "" || fstype == "ext4" {
		if fstype == "xfs" {
			csitest.SkipWithoutKernelOption(t, "CONFIG_XFS_QUOTA", "xfs project quotas")
		} else {
			csitest.SkipWithoutKernelOption(t, "CONFIG_QFMT_V2", "ext4's quota feature")
		}
	}
	tmp := t.TempDir()
	img, dir := filepath.Join(tmp, "fs.img"), filepath.Join(tmp, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 320<<20); err != nil {
		t.Fatal(err)
	}
	args := []string{"-q", img}
	if fstype == "ext4" {
		args = []string{"-q", "-F", "-O", "quota,project", "-I", "256", img}
	}
	if out, err := exec.Command("mkfs."+fstype, args...).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.%s: %v: %s", fstype, err, out)
	}
	dev, err := block.AttachLoop(context.Background(), img, block.LoopOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { block.DetachLoop(context.Background(), dev) })
	if err := unix.Mount(dev, dir, fstype, 0, opts); err != nil {
		t.Fatalf("mount %s (%s, %q): %v", dev, fstype, opts, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// logBuffer collects a driver's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// writeBytes writes n bytes to a new file as an unprivileged user (uid and gid
// 65534, no capabilities: quota limits bind root too on xfs, but ext4 lets
// CAP_SYS_RESOURCE pass them, so only an unprivileged writer — a pod's —
// proves a limit), syncing at the end. It returns the file's size and the
// error dd met: ENOSPC or EDQUOT when it names one.
func writeBytes(path string, n int) (int, error) {
	cmd := exec.Command("dd", "if=/dev/zero", "of="+path, "bs=65536", fmt.Sprintf("count=%d", n/65536), "conv=fsync", "status=none")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	size := 0
	if st, serr := os.Stat(path); serr == nil {
		size = int(st.Size())
	}
	if err == nil {
		return size, nil
	}
	msg := strings.ToLower(string(out))
	for _, e := range []unix.Errno{unix.ENOSPC, unix.EDQUOT} {
		if strings.Contains(msg, strings.ToLower(e.Error())) {
			return size, e
		}
	}
	return size, fmt.Errorf("dd: %v: %s", err, out)
}

func statsTotal(t *testing.T, s *served, id, path string) int64 {
	t.Helper()
	resp, err := s.node.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: path})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range resp.GetUsage() {
		if u.GetUnit() == csi.VolumeUsage_BYTES {
			return u.GetTotal()
		}
	}
	t.Fatalf("no BYTES usage in %v", resp)
	return 0
}

// TestDirectoryVolumeQuota: with the state directory on xfs or ext4 with
// project quotas, a directory volume holds no more than its capacity
// (ENOSPC beyond it), NodeGetVolumeStats reports the capacity as its size,
// expansion raises the limit, a clone gets its own project, and deleting
// the volume removes its limit.
func TestDirectoryVolumeQuota(t *testing.T) {
	if inQuotaVM(t) {
		return
	}
	const capacity = 4 << 20
	for _, fstype := range []string{"xfs", "ext4"} {
		t.Run(fstype, func(t *testing.T) {
			root := quotaFS(t, fstype, "prjquota")
			var log logBuffer
			dir := shortDir(t, "hpq")
			if err := os.Chmod(dir, 0o755); err != nil { // writeBytes writes as nobody, under dir
				t.Fatal(err)
			}
			s := serve(t, dir, driver.Options{StateDir: filepath.Join(root, "state"),
				Logger: slog.New(slog.NewTextHandler(&log, nil))})
			if !strings.Contains(log.String(), "capacity enforced with project quotas") {
				t.Errorf("the driver did not say it enforces capacity with project quotas; log:\n%s", log.String())
			}
			ctx := context.Background()
			id := createVol(t, s, "q", capacity, capFor(false, ""), nil)
			_, target := stagePublish(t, s, dir, id, capFor(false, ""))
			if got := statsTotal(t, s, id, target); got != capacity {
				t.Errorf("NodeGetVolumeStats total %d, want the capacity %d", got, capacity)
			}
			n, err := writeBytes(filepath.Join(target, "big"), 2*capacity)
			t.Logf("%s: a pod's write beyond the capacity fails with %v", fstype, err)
			if (!errors.Is(err, unix.ENOSPC) && !errors.Is(err, unix.EDQUOT)) || n > capacity {
				t.Errorf("writing %d bytes into a %d-byte volume: %v after %d bytes, want ENOSPC (xfs) or EDQUOT (ext4) within the capacity", 2*capacity, capacity, err, n)
			}

			if _, err := s.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: id,
				CapacityRange: &csi.CapacityRange{RequiredBytes: 4 * capacity}}); err != nil {
				t.Fatal(err)
			}
			if got := statsTotal(t, s, id, target); got != 4*capacity {
				t.Errorf("NodeGetVolumeStats total after expansion %d, want %d", got, 4*capacity)
			}
			if n, err := writeBytes(filepath.Join(target, "more"), 2*capacity); err != nil {
				t.Errorf("writing after expansion: %v after %d bytes", err, n)
			}

			clone := createVol(t, s, "clone", 4*capacity, capFor(false, ""), &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
				Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}})
			srcProj, _ := quota.Project(ctx, filepath.Join(root, "state", "volumes", id))
			cloneProj, err := quota.Project(ctx, filepath.Join(root, "state", "volumes", clone))
			if err != nil || cloneProj == 0 || cloneProj == srcProj {
				t.Errorf("clone's project %d (%v), source's %d: want its own", cloneProj, err, srcProj)
			}
			if p, _ := quota.Project(ctx, filepath.Join(root, "state", "volumes", clone, "more")); p != cloneProj {
				t.Errorf("a copied file is in project %d, want the clone's %d", p, cloneProj)
			}
			if u, err := quota.Get(ctx, root, cloneProj); err != nil || u.LimitBytes != 4*capacity || u.Bytes < capacity {
				t.Errorf("clone's quota %+v (%v): want limit %d and its copied bytes", u, err, 4*capacity)
			}

			if _, err := s.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: filepath.Join(dir, "staging-"+id)}); err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{id, clone} {
				if _, err := s.ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: v}); err != nil {
					t.Fatal(err)
				}
			}
			for _, p := range []quota.ProjectID{srcProj, cloneProj} {
				// xfs frees unlinked inodes in the background (inodegc), so
				// their usage leaves the project a little later: wait.
				var u quota.Usage
				var err error
				for i := 0; i < 50; i++ {
					unix.Sync()
					if u, err = quota.Get(ctx, root, p); err != nil || (u.LimitBytes == 0 && u.Inodes == 0) {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				if err != nil || u.LimitBytes != 0 || u.Inodes != 0 {
					t.Errorf("project %d after delete: %+v (%v), want no limit and no files", p, u, err)
				}
			}
		})
	}
}

// TestDirectoryVolumeNoQuota: on a filesystem without project quotas the
// driver says so once, at start, and keeps accounting only: a volume can
// be written beyond its capacity, as before.
func TestDirectoryVolumeNoQuota(t *testing.T) {
	root := quotaFS(t, "xfs", "")
	var log logBuffer
	dir := shortDir(t, "hpnq")
	s := serve(t, dir, driver.Options{StateDir: filepath.Join(root, "state"), Logger: slog.New(slog.NewTextHandler(&log, nil))})
	const capacity = 1 << 20
	var ids []string
	for _, name := range []string{"a", "b", "c"} {
		ids = append(ids, createVol(t, s, name, capacity, capFor(false, ""), nil))
	}
	if got := strings.Count(log.String(), "capacity is accounted but not enforced"); got != 1 {
		t.Errorf("the driver said %d times that capacity is not enforced, want once; log:\n%s", got, log.String())
	}
	if err := os.WriteFile(filepath.Join(volDir(t, s, filepath.Join(root, "state"), ids[0]), "f"), make([]byte, 2*capacity), 0o644); err != nil {
		t.Errorf("writing beyond the capacity without quotas: %v, want today's behaviour (no limit)", err)
	}
}

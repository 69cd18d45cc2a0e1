//go:build linux

package health_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/csikit/csikit/stats"

	"github.com/csikit/csikit/internal/testenv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/health"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// reasons renders entries as "STATUS/Reason" for comparison.
func reasons(entries []*csi.VolumeHealth_VolumeHealthEntry) string {
	var s []string
	for _, e := range entries {
		s = append(s, e.GetStatus().String()+"/"+e.GetReason())
	}
	return strings.Join(s, ",")
}

func checkHealth(t *testing.T, path string, checks health.Check, want string) []*csi.VolumeHealth_VolumeHealthEntry {
	t.Helper()
	got, err := health.Path(context.Background(), path, checks)
	if err != nil {
		t.Fatalf("PathHealth(%s): got error %v, want nil", path, err)
	}
	if reasons(got) != want {
		t.Fatalf("PathHealth(%s): got %q, want %q (%v)", path, reasons(got), want, got)
	}
	return got
}

func TestPathHealthUnmounted(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	checkHealth(t, filepath.Join(tmp, "missing"), health.AllChecks, "INACCESSIBLE/PathMissing")
	checkHealth(t, filepath.Join(tmp, "missing"), health.AllChecks&^health.CheckExists, "")
	checkHealth(t, tmp, health.AllChecks, "INACCESSIBLE/NotMounted")
	checkHealth(t, tmp, health.AllChecks&^health.CheckMounted, "")
	checkHealth(t, file, health.AllChecks, "INACCESSIBLE/NotMounted")
	checkHealth(t, "/", health.AllChecks, "")

	if _, err := health.Path(context.Background(), "relative/path", health.AllChecks); status.Code(err) != codes.InvalidArgument {
		t.Errorf("PathHealth(relative): got %v, want InvalidArgument", err)
	}
}

func TestPathHealthMounted(t *testing.T) {
	dir, _ := testenv.MountFS(t, "ext4", 32<<20, "")
	checkHealth(t, dir, health.AllChecks, "")
}

// A read-only mount on purpose is healthy; a superblock the kernel turned
// read-only under a read-write mount (errors=remount-ro) is DEGRADED.
func TestPathHealthReadOnly(t *testing.T) {
	t.Run("mounted ro on purpose", func(t *testing.T) {
		dir, _ := testenv.MountFS(t, "ext4", 32<<20, "ro")
		checkHealth(t, dir, health.AllChecks, "")
	})
	t.Run("errors=remount-ro after an fs error", func(t *testing.T) {
		dir, dev := testenv.MountFS(t, "ext4", 32<<20, "errors=remount-ro")
		trigger := filepath.Join("/sys/fs/ext4", filepath.Base(dev), "trigger_fs_error")
		if _, err := os.Stat(trigger); err != nil {
			testenv.Skipf(t, "needs ext4's %s to inject an error: %v", trigger, err)
		}
		checkHealth(t, dir, health.AllChecks, "")
		if err := os.WriteFile(trigger, []byte("1"), 0o200); err != nil {
			t.Fatalf("injecting an ext4 error: %v", err)
		}
		got := checkHealth(t, dir, health.AllChecks, "DEGRADED/FilesystemReadOnly")
		if !strings.Contains(got[0].GetMessage(), dir) {
			t.Errorf("message: got %q, want it to name %s", got[0].GetMessage(), dir)
		}
		checkHealth(t, dir, health.AllChecks&^health.CheckWritable, "")
		if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o600); !errors.Is(err, syscall.EROFS) {
			t.Errorf("writing after the error: got %v, want EROFS (the test's premise)", err)
		}
	})
}

// A raw block volume whose loop device is detached reads as size 0.
func TestPathHealthBlockDeviceGone(t *testing.T) {
	dev := testenv.LoopDevice(t, 16<<20)
	target := testenv.BindBlock(t, dev)
	checkHealth(t, target, health.AllChecks, "")
	testenv.Detach(t, dev)
	checkHealth(t, target, health.AllChecks, "INACCESSIBLE/DeviceGone")
	checkHealth(t, target, health.AllChecks&^health.CheckDevice, "")
	// Stats report the truth, size 0, rather than an error or a guess.
	resp, err := stats.VolumeStats(context.Background(), target)
	if err != nil || resp.GetUsage()[0].GetTotal() != 0 {
		t.Errorf("VolumeStats on a detached device: got %v, %v, want total 0", resp, err)
	}
}

func TestNodeVolumeHealth(t *testing.T) {
	tmp := t.TempDir()
	ctx := context.Background()
	req := &csi.NodeGetVolumeHealthRequest{
		VolumeId:          "vol-1",
		StagingTargetPath: filepath.Join(tmp, "staging"),
		VolumePublishPath: filepath.Join(tmp, "publish"),
	}
	for _, d := range []string{req.StagingTargetPath, req.VolumePublishPath} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	backend := func(ctx context.Context, id string) ([]*csi.VolumeHealth_VolumeHealthEntry, error) {
		if id != "vol-1" {
			return nil, status.Errorf(codes.NotFound, "volume %q not found", id)
		}
		return []*csi.VolumeHealth_VolumeHealthEntry{health.Degraded("ReplicaMissing", "1 of 3 replicas down")}, nil
	}
	resp, err := health.NodeVolume(ctx, req, health.Options{Check: backend})
	if err != nil {
		t.Fatalf("NodeVolumeHealth: got %v, want nil", err)
	}
	h := resp.GetVolumeHealth()
	if h.GetVolumeId() != "vol-1" {
		t.Errorf("volume_id: got %q, want vol-1", h.GetVolumeId())
	}
	// Both paths are unmounted: one merged NotMounted entry naming both.
	if got, want := reasons(h.GetHealthStatuses()), "INACCESSIBLE/NotMounted,DEGRADED/ReplicaMissing"; got != want {
		t.Fatalf("entries: got %q, want %q", got, want)
	}
	msg := h.GetHealthStatuses()[0].GetMessage()
	if !strings.Contains(msg, "staging_target_path") || !strings.Contains(msg, "volume_publish_path") {
		t.Errorf("merged message: got %q, want both paths named", msg)
	}

	resp, err = health.NodeVolume(ctx, req, health.Options{Skip: health.CheckMounted})
	if err != nil || len(resp.GetVolumeHealth().GetHealthStatuses()) != 0 {
		t.Errorf("with CheckMounted skipped: got %v, %v, want no entries", resp, err)
	}

	for _, tc := range []struct {
		name string
		req  *csi.NodeGetVolumeHealthRequest
		want codes.Code
	}{
		{"no volume id", &csi.NodeGetVolumeHealthRequest{VolumePublishPath: tmp}, codes.InvalidArgument},
		{"relative path", &csi.NodeGetVolumeHealthRequest{VolumeId: "vol-1", VolumePublishPath: "a/b"}, codes.InvalidArgument},
		{"unknown volume", &csi.NodeGetVolumeHealthRequest{VolumeId: "vol-2"}, codes.NotFound},
	} {
		_, err := health.NodeVolume(ctx, tc.req, health.Options{Check: backend})
		if got := status.Code(err); got != tc.want {
			t.Errorf("%s: got %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
}

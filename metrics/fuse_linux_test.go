//go:build linux

package metrics_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csikit/csikit/health"
	"github.com/csikit/csikit/stats"

	"github.com/csikit/csikit/internal/testenv"

	"github.com/csikit/csikit/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// hungFUSE mounts a FUSE filesystem whose daemon never answers: statfs on
// it blocks in the kernel, like a dead network mount. kill aborts the
// connection (as a crashed daemon does): blocked calls then fail with
// ENOTCONN. Everything is undone when the test ends.
func hungFUSE(t *testing.T) (dir string, kill func()) {
	t.Helper()
	testenv.RequireRoot(t, "mounts FUSE")
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		testenv.Skipf(t, "needs /dev/fuse: %v", err)
	}
	dir = filepath.Join(t.TempDir(), "fuse")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	if err := unix.Mount("csikit-test", dir, "fuse.csikit-test", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		unix.Close(fd)
		testenv.Skipf(t, "cannot mount FUSE: %v", err)
	}
	var once sync.Once
	kill = func() { once.Do(func() { unix.Close(fd) }) }
	t.Cleanup(func() {
		kill()
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir, kill
}

// stuckReads counts goroutines blocked inside a volume read.
func stuckReads() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "stats.Config.Read(")
}

// waitNoStuckReads waits until the aborted reads have returned.
func waitNoStuckReads(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); stuckReads() > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d volume reads still stuck after the FUSE connection was aborted", stuckReads())
		}
	}
}

func TestHungMount(t *testing.T) {
	dir, kill := hungFUSE(t)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := stats.VolumeStats(ctx, dir); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("VolumeStats on a hung mount: got %v, want DeadlineExceeded", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if _, err := health.Path(ctx2, dir, health.AllChecks); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("health.Path on a hung mount: got %v, want DeadlineExceeded", err)
	}

	// The collector gives up within its Timeout, and does not pile up a
	// second stuck read for the same volume on the next scrape.
	c := metrics.NewVolumeStatsCollector(metrics.VolumeStatsOptions{
		DriverName: "test.csikit.io",
		Timeout:    100 * time.Millisecond,
		Stats:      stats.Config{AllowUnmounted: true},
		Volumes: func(ctx context.Context) ([]metrics.PublishedVolume, error) {
			return []metrics.PublishedVolume{{ID: "hung", Path: dir}, {ID: "root", Path: "/"}}, nil
		},
	})
	want := `
# HELP csi_plugin_volume_stats_up 1 when the volume's stats were read in this scrape, 0 when reading failed or timed out.
# TYPE csi_plugin_volume_stats_up gauge
csi_plugin_volume_stats_up{driver_name="test.csikit.io",volume_id="hung"} 0
csi_plugin_volume_stats_up{driver_name="test.csikit.io",volume_id="root"} 1
`
	before := stuckReads()
	for scrape := range 3 {
		if err := testutil.CollectAndCompare(c, strings.NewReader(want), metrics.VolumeStatsUpName); err != nil {
			t.Errorf("scrape %d: %v", scrape, err)
		}
	}
	if got := stuckReads() - before; got != 1 {
		t.Errorf("stuck reads of the hung volume after 3 scrapes: got %d, want 1", got)
	}

	// The daemon dies: the stuck calls return and health names the cause.
	kill()
	waitNoStuckReads(t)
	entries, err := health.Path(context.Background(), dir, health.AllChecks)
	if err != nil || len(entries) != 1 || entries[0].GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE || entries[0].GetReason() != health.ReasonPathError || !strings.Contains(entries[0].GetMessage(), "not connected") {
		t.Errorf("health.Path on a dead FUSE mount: got %v, %v, want INACCESSIBLE/PathError naming ENOTCONN", entries, err)
	}
	if _, err := stats.VolumeStats(context.Background(), dir); status.Code(err) != codes.Internal {
		t.Errorf("VolumeStats on a dead FUSE mount: got %v, want Internal", err)
	}
}

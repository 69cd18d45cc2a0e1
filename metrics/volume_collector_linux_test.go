//go:build linux

package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/csikit/csikit/internal/testenv"
	"github.com/csikit/csikit/stats"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestVolumeStatsCollector(t *testing.T) {
	dir, _ := testenv.MountFS(t, "ext4", 32<<20, "")
	const blockSize = 16 << 20
	blockTarget := testenv.BindBlock(t, testenv.LoopDevice(t, blockSize))
	vols := []metrics.PublishedVolume{
		{ID: "fs-vol", Path: dir},
		{ID: "block-vol", Path: blockTarget},
		{ID: "gone-vol", Path: filepath.Join(t.TempDir(), "missing")},
		{ID: "bad-\xff-id", Path: dir}, // not UTF-8: dropped, not panicked on
	}
	c := metrics.NewVolumeStatsCollector(metrics.VolumeStatsOptions{
		DriverName: "test.csikit.io",
		Volumes:    func(ctx context.Context) ([]metrics.PublishedVolume, error) { return vols, nil },
	})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)

	// Expected values come from VolumeStats itself, read with nothing
	// written in between.
	resp, err := stats.VolumeStats(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var b, in *csi.VolumeUsage
	for _, u := range resp.GetUsage() {
		if u.GetUnit() == csi.VolumeUsage_BYTES {
			b = u
		} else {
			in = u
		}
	}
	lbl := `{driver_name="test.csikit.io",volume_id="%s"} %d`
	var want strings.Builder
	for _, s := range []struct {
		name, help string
		lines      []string
	}{
		{metrics.VolumeAvailableBytesName, "Bytes available to unprivileged writers on the volume.", []string{fmt.Sprintf(lbl, "fs-vol", b.GetAvailable())}},
		{metrics.VolumeCapacityBytesName, "Capacity in bytes of the volume.", []string{fmt.Sprintf(lbl, "block-vol", blockSize), fmt.Sprintf(lbl, "fs-vol", b.GetTotal())}},
		{metrics.VolumeInodesName, "Inodes on the volume's filesystem.", []string{fmt.Sprintf(lbl, "fs-vol", in.GetTotal())}},
		{metrics.VolumeInodesFreeName, "Free inodes on the volume's filesystem.", []string{fmt.Sprintf(lbl, "fs-vol", in.GetAvailable())}},
		{metrics.VolumeInodesUsedName, "Used inodes on the volume's filesystem.", []string{fmt.Sprintf(lbl, "fs-vol", in.GetUsed())}},
		{metrics.VolumeStatsUpName, "1 when the volume's stats were read in this scrape, 0 when reading failed or timed out.", []string{fmt.Sprintf(lbl, "block-vol", 1), fmt.Sprintf(lbl, "fs-vol", 1), fmt.Sprintf(lbl, "gone-vol", 0)}},
		{metrics.VolumeUsedBytesName, "Bytes used on the volume.", []string{fmt.Sprintf(lbl, "fs-vol", b.GetUsed())}},
	} {
		fmt.Fprintf(&want, "# HELP %s %s\n# TYPE %s gauge\n", s.name, s.help, s.name)
		for _, l := range s.lines {
			fmt.Fprintf(&want, "%s%s\n", s.name, l)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want.String())); err != nil {
		t.Error(err)
	}
}

// A Volumes func that hangs is cut off by Timeout and the scrape reports
// the error instead of blocking.
func TestVolumeStatsCollectorTimeout(t *testing.T) {
	c := metrics.NewVolumeStatsCollector(metrics.VolumeStatsOptions{
		Timeout: 50 * time.Millisecond,
		Volumes: func(ctx context.Context) ([]metrics.PublishedVolume, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	_, err := reg.Gather()
	if !errors.Is(err, context.DeadlineExceeded) && (err == nil || !strings.Contains(err.Error(), "deadline exceeded")) {
		t.Errorf("Gather with a hanging volume list: got %v, want a deadline-exceeded error", err)
	}
}

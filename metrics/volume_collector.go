package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/csikit/csikit/internal/pathstat"
	"github.com/csikit/csikit/stats"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PublishedVolume names a volume a node plugin has published and the path
// to read its usage at.
type PublishedVolume struct {
	ID   string // the CSI volume ID, the volume_id label
	Path string // absolute staged or published path
}

// VolumeStatsOptions configures NewVolumeStatsCollector.
type VolumeStatsOptions struct {
	// DriverName is the driver_name label. Empty means UnknownDriver.
	DriverName string

	// Volumes lists the volumes to report, on every scrape. Required. Its
	// ctx ends when the scrape's Timeout does.
	Volumes func(ctx context.Context) ([]PublishedVolume, error)

	// Timeout bounds one scrape: volumes not read by then are reported
	// with csi_plugin_volume_stats_up 0. Default 5s.
	Timeout time.Duration

	// Concurrency is how many volumes are read at once. Default 4.
	Concurrency int

	// Stats configures how each volume is read.
	Stats stats.Config
}

// Per-volume metric names exported by VolumeStatsCollector, all labelled
// {driver_name, volume_id}.
const (
	VolumeCapacityBytesName  = "csi_plugin_volume_stats_capacity_bytes"
	VolumeAvailableBytesName = "csi_plugin_volume_stats_available_bytes"
	VolumeUsedBytesName      = "csi_plugin_volume_stats_used_bytes"
	VolumeInodesName         = "csi_plugin_volume_stats_inodes"
	VolumeInodesFreeName     = "csi_plugin_volume_stats_inodes_free"
	VolumeInodesUsedName     = "csi_plugin_volume_stats_inodes_used"
	VolumeStatsUpName        = "csi_plugin_volume_stats_up"
)

// VolumeStatsCollector is a prometheus.Collector exposing capacity,
// available and used bytes and inodes of every published volume, computed
// on scrape with stats.VolumeStats and bounded by VolumeStatsOptions.Timeout.
// A volume whose previous read is still stuck in the kernel is not read
// again (so a hung mount costs one goroutine, not one per scrape) and is
// reported with csi_plugin_volume_stats_up 0, as are volumes whose read
// failed. Block volumes report capacity only.
type VolumeStatsCollector struct {
	opts  VolumeStatsOptions
	descs map[string]*prometheus.Desc

	mu   sync.Mutex
	busy map[string]bool // volume IDs whose read has not returned yet
}

// NewVolumeStatsCollector returns the collector described by opts; register
// it on the caller's registry.
func NewVolumeStatsCollector(opts VolumeStatsOptions) *VolumeStatsCollector {
	if opts.Timeout <= 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.DriverName == "" {
		opts.DriverName = UnknownDriver
	}
	c := &VolumeStatsCollector{opts: opts, descs: map[string]*prometheus.Desc{}, busy: map[string]bool{}}
	constLabels := prometheus.Labels{labelDriver: opts.DriverName}
	for name, help := range map[string]string{
		VolumeCapacityBytesName:  "Capacity in bytes of the volume.",
		VolumeAvailableBytesName: "Bytes available to unprivileged writers on the volume.",
		VolumeUsedBytesName:      "Bytes used on the volume.",
		VolumeInodesName:         "Inodes on the volume's filesystem.",
		VolumeInodesFreeName:     "Free inodes on the volume's filesystem.",
		VolumeInodesUsedName:     "Used inodes on the volume's filesystem.",
		VolumeStatsUpName:        "1 when the volume's stats were read in this scrape, 0 when reading failed or timed out.",
	} {
		c.descs[name] = prometheus.NewDesc(name, help, []string{"volume_id"}, constLabels)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *VolumeStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it lists the volumes and reads
// them, at most Concurrency at a time, within Timeout.
func (c *VolumeStatsCollector) Collect(ch chan<- prometheus.Metric) {
	if c.opts.Volumes == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	vols, err := c.opts.Volumes(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.descs[VolumeStatsUpName], err)
		return
	}
	work := make(chan PublishedVolume)
	var wg sync.WaitGroup
	for range min(c.opts.Concurrency, len(vols)) {
		wg.Go(func() {
			for v := range work {
				s, err := c.read(ctx, v)
				c.emit(ch, v.ID, s, err)
			}
		})
	}
	for _, v := range vols {
		work <- v
	}
	close(work)
	wg.Wait()
}

// read reads one volume unless a previous read of it is still running. The
// read runs in its own goroutine, which clears the busy mark when the
// kernel returns, however long after the scrape gave up on it.
func (c *VolumeStatsCollector) read(ctx context.Context, v PublishedVolume) (stats.Result, error) {
	p, err := pathstat.CleanPath("path", v.Path)
	if err != nil {
		return stats.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return stats.Result{}, status.FromContextError(err).Err()
	}
	c.mu.Lock()
	if c.busy[v.ID] {
		c.mu.Unlock()
		return stats.Result{}, status.Errorf(codes.Unavailable, "volume %q: previous read still running", v.ID)
	}
	c.busy[v.ID] = true
	c.mu.Unlock()
	type result struct {
		s   stats.Result
		err error
	}
	ch := make(chan result, 1)
	go func() {
		s, err := c.opts.Stats.Read(p)
		c.mu.Lock()
		delete(c.busy, v.ID)
		c.mu.Unlock()
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		return r.s, r.err
	case <-ctx.Done():
		return stats.Result{}, status.FromContextError(ctx.Err()).Err()
	}
}

// emit sends one volume's gauges. Label values that are not valid UTF-8
// make NewConstMetric fail; such series are skipped, never panicked on.
func (c *VolumeStatsCollector) emit(ch chan<- prometheus.Metric, id string, s stats.Result, err error) {
	send := func(name string, v int64) {
		if m, merr := prometheus.NewConstMetric(c.descs[name], prometheus.GaugeValue, float64(v), id); merr == nil {
			ch <- m
		}
	}
	if err != nil {
		send(VolumeStatsUpName, 0)
		return
	}
	send(VolumeStatsUpName, 1)
	for _, u := range s.Response.GetUsage() {
		switch u.GetUnit() {
		case csi.VolumeUsage_BYTES:
			send(VolumeCapacityBytesName, u.GetTotal())
			if !s.Block { // block volumes have no used/available
				send(VolumeAvailableBytesName, u.GetAvailable())
				send(VolumeUsedBytesName, u.GetUsed())
			}
		case csi.VolumeUsage_INODES:
			send(VolumeInodesName, u.GetTotal())
			send(VolumeInodesFreeName, u.GetAvailable())
			send(VolumeInodesUsedName, u.GetUsed())
		}
	}
}

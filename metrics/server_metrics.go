package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Metric names exported by ServerMetrics.
const (
	OperationsSecondsName = "csi_plugin_operations_seconds"
	InflightRequestsName  = "csi_plugin_inflight_requests"
	PanicsRecoveredName   = "csi_plugin_panics_recovered_total"
	VolumeLocksHeldName   = "csi_plugin_volume_locks_held"
	VolumeLockOldestName  = "csi_plugin_volume_lock_oldest_seconds"
	labelDriver           = "driver_name"
	labelMethod           = "method_name"
	labelCode             = "grpc_status_code"
	numCodes              = int(codes.Unauthenticated) + 1
	operationsSecondsHelp = "Container Storage Interface operation duration with gRPC error code status total"
	inflightRequestsHelp  = "CSI requests being served, by gRPC method."
	panicsRecoveredHelp   = "Panics recovered in CSI request handlers, by gRPC method."
	volumeLocksHeldHelp   = "Volume, name and snapshot locks currently held."
	volumeLockOldestHelp  = "Age in seconds of the oldest volume lock currently held (0 when none is held)."
)

// ServerMetrics is a prometheus.Collector for the gRPC side of a CSI
// driver: the operations histogram (csi-lib-utils' name and labels), the
// requests in flight per method, the panics recovered per method and,
// when ServerOptions.LockStats is set, the held volume locks and the age of
// the oldest. Register it on the caller's registry and install
// UnaryServerInterceptor in the server's chain.
//
// A nil *ServerMetrics is valid: its interceptor passes calls straight
// through and PanicRecovered does nothing, so a server built without a
// registry pays nothing.
type ServerMetrics struct {
	driver    string
	ops       *prometheus.HistogramVec
	inflight  *prometheus.GaugeVec
	panics    *prometheus.CounterVec
	lockStats func() (int, time.Duration)
	locksHeld *prometheus.Desc
	lockAge   *prometheus.Desc

	// methods caches the per-method children so the hot path does no label
	// hashing: full method name -> *methodMetrics.
	methods sync.Map
}

type methodMetrics struct {
	name     string
	inflight prometheus.Gauge
	codes    [numCodes]atomic.Pointer[prometheus.Observer]
}

// NewServerMetrics returns the collectors described by opts. Nothing is
// registered; call reg.MustRegister(m) on the caller's registry.
func NewServerMetrics(opts ServerOptions) *ServerMetrics {
	buckets := opts.Buckets
	if len(buckets) == 0 {
		buckets = DefaultBuckets
	}
	m := &ServerMetrics{
		driver: opts.driverName(),
		ops: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: OperationsSecondsName, Help: operationsSecondsHelp, Buckets: buckets,
		}, []string{labelDriver, labelMethod, labelCode}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: InflightRequestsName, Help: inflightRequestsHelp,
		}, []string{labelDriver, labelMethod}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: PanicsRecoveredName, Help: panicsRecoveredHelp,
		}, []string{labelDriver, labelMethod}),
		lockStats: opts.LockStats,
	}
	if m.lockStats != nil {
		constLabels := prometheus.Labels{labelDriver: m.driver}
		m.locksHeld = prometheus.NewDesc(VolumeLocksHeldName, volumeLocksHeldHelp, nil, constLabels)
		m.lockAge = prometheus.NewDesc(VolumeLockOldestName, volumeLockOldestHelp, nil, constLabels)
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *ServerMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.ops.Describe(ch)
	m.inflight.Describe(ch)
	m.panics.Describe(ch)
	if m.lockStats != nil {
		ch <- m.locksHeld
		ch <- m.lockAge
	}
}

// Collect implements prometheus.Collector. It calls ServerOptions.LockStats
// once per scrape.
func (m *ServerMetrics) Collect(ch chan<- prometheus.Metric) {
	m.ops.Collect(ch)
	m.inflight.Collect(ch)
	m.panics.Collect(ch)
	if m.lockStats != nil {
		held, oldest := m.lockStats()
		ch <- prometheus.MustNewConstMetric(m.locksHeld, prometheus.GaugeValue, float64(held))
		ch <- prometheus.MustNewConstMetric(m.lockAge, prometheus.GaugeValue, oldest.Seconds())
	}
}

// UnaryServerInterceptor returns the interceptor that times every call and
// counts it in csi_plugin_operations_seconds under its full gRPC method and
// the name of its status code, and keeps csi_plugin_inflight_requests. A
// handler that panics is counted as Internal (what a recovery interceptor
// outside this one answers) and the panic continues unchanged.
func (m *ServerMetrics) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	if m == nil {
		return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			return handler(ctx, req)
		}
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		mm := m.method(info.FullMethod)
		mm.inflight.Inc()
		start := time.Now()
		returned := false
		defer func() {
			mm.inflight.Dec()
			if !returned { // panicking or runtime.Goexit
				m.observe(mm, codes.Internal, time.Since(start))
			}
		}()
		resp, err := handler(ctx, req)
		returned = true
		m.observe(mm, status.Code(err), time.Since(start))
		return resp, err
	}
}

// PanicRecovered counts one recovered panic for the full gRPC method; the
// recovery interceptor calls it. Safe on a nil *ServerMetrics.
func (m *ServerMetrics) PanicRecovered(method string) {
	if m == nil {
		return
	}
	m.panics.WithLabelValues(m.driver, method).Inc()
}

func (m *ServerMetrics) method(name string) *methodMetrics {
	if v, ok := m.methods.Load(name); ok {
		return v.(*methodMetrics)
	}
	mm := &methodMetrics{name: name, inflight: m.inflight.WithLabelValues(m.driver, name)}
	v, _ := m.methods.LoadOrStore(name, mm)
	return v.(*methodMetrics)
}

func (m *ServerMetrics) observe(mm *methodMetrics, c codes.Code, d time.Duration) {
	if int(c) >= numCodes { // a code newer than this package: no cache slot
		m.ops.WithLabelValues(m.driver, mm.name, c.String()).Observe(d.Seconds())
		return
	}
	p := mm.codes[c].Load()
	if p == nil {
		o := m.ops.WithLabelValues(m.driver, mm.name, c.String())
		p = &o
		mm.codes[c].Store(p)
	}
	(*p).Observe(d.Seconds())
}

// StreamServerInterceptor is the stream variant of UnaryServerInterceptor:
// a streaming call is timed from start to the handler's return and counted
// under its status code; a panicking handler counts as Internal.
func (m *ServerMetrics) StreamServerInterceptor() grpc.StreamServerInterceptor {
	if m == nil {
		return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			return handler(srv, ss)
		}
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		mm := m.method(info.FullMethod)
		mm.inflight.Inc()
		start := time.Now()
		returned := false
		defer func() {
			mm.inflight.Dec()
			if !returned {
				m.observe(mm, codes.Internal, time.Since(start))
			}
		}()
		err := handler(srv, ss)
		returned = true
		m.observe(mm, status.Code(err), time.Since(start))
		return err
	}
}

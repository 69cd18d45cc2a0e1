package runner

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/k8s/registration"
	"github.com/csikit/csikit/metrics"
)

// DefaultSweepInterval is DriverOptions.SweepInterval's default.
const DefaultSweepInterval = time.Hour

// DriverOptions are a CSI driver's standard parts for NewDriver.
type DriverOptions struct {
	// Server is the driver's csikit server. Required.
	Server *csikit.Server
	// Endpoint is where the CSI server listens (unix:///path, /path or
	// tcp://host:port). Required.
	Endpoint string

	// HTTPAddress is the TCP address of the HTTP server for /metrics,
	// /healthz and /readyz (e.g. ":9808"); empty (and no HTTPListener)
	// means none.
	HTTPAddress string
	// HTTPListener, when set, is served instead of listening on
	// HTTPAddress (tests: a listener on port 0).
	HTTPListener net.Listener
	// Metrics is what /metrics exposes, normally the registry also given
	// to the server as csikit.Options.Registry; nil means no /metrics.
	Metrics prometheus.Gatherer

	// Registration, when set, registers the driver with kubelet
	// (k8s/registration) while it runs; kubelet's report of a failed
	// registration fails /healthz, so the pod is restarted. Its Logger
	// defaults to Logger.
	Registration *registration.Options

	// Sweep, when set, is called at start and then every SweepInterval
	// (default DefaultSweepInterval), e.g. to release abandoned journal
	// reservations; its errors are logged and it tries again next time.
	Sweep         func(ctx context.Context) error
	SweepInterval time.Duration

	// Logger receives the parts' start, stop and failure lines; nil
	// discards them.
	Logger *slog.Logger
	// StopTimeout is Options.StopTimeout of the group.
	StopTimeout time.Duration
}

// Driver is a Group holding a CSI driver's standard parts, built by
// NewDriver. Add more parts or checks before Run.
type Driver struct {
	*Group
}

// NewDriver builds the group of a CSI driver's standard parts, added in
// this order (so stopped in reverse): "http" (/metrics, /healthz, /readyz),
// "kubelet-registration" (its check: kubelet's report), "csi" (the CSI
// server), "sweep"; and the liveness checks "probe" (the server's Probe,
// so the driver's Prober unless Options.Disable lists it, and the journal)
// and "journal" (Server.JournalErr). It returns an error for missing
// required options or invalid registration options.
func NewDriver(opts DriverOptions) (*Driver, error) {
	if opts.Server == nil {
		return nil, errors.New("runner: DriverOptions.Server is required")
	}
	if opts.Endpoint == "" {
		return nil, errors.New("runner: DriverOptions.Endpoint is required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := New(Options{Logger: log, StopTimeout: opts.StopTimeout})
	if opts.HTTPAddress != "" || opts.HTTPListener != nil {
		mux := http.NewServeMux()
		health := g.HealthHandler()
		mux.Handle("/healthz", health)
		mux.Handle("/readyz", health)
		if opts.Metrics != nil {
			mux.Handle("/metrics", metrics.Handler(metrics.HTTPOptions{Gatherer: opts.Metrics, Logger: log}))
		}
		g.Add("http", &HTTPServer{Addr: opts.HTTPAddress, Listener: opts.HTTPListener, Handler: mux, Logger: log})
	}
	if opts.Registration != nil {
		ro := *opts.Registration
		if ro.Logger == nil {
			ro.Logger = log
		}
		kubelet, err := registration.New(ro)
		if err != nil {
			return nil, err
		}
		g.Add("kubelet-registration", Func(kubelet.Run), WithCheck(func(context.Context) error { return statusText(kubelet.Err()) }))
	}
	srv, ep := opts.Server, opts.Endpoint
	g.Add("csi", Func(func(ctx context.Context) error { return srv.ListenAndServe(ctx, ep) }))
	if opts.Sweep != nil {
		every := opts.SweepInterval
		if every <= 0 {
			every = DefaultSweepInterval
		}
		g.Add("sweep", Every(every, opts.Sweep, func(err error) { log.Warn("sweep failed; trying again later", "error", err) }))
	}
	g.AddHealthzCheck("probe", ProbeCheck(srv))
	g.AddHealthzCheck("journal", func(context.Context) error { return statusText(srv.JournalErr()) })
	return &Driver{Group: g}, nil
}

// Run runs the group (Group.Run) until ctx ends, the process gets SIGINT
// or SIGTERM, or a part fails, then stops the parts in reverse order.
func (d *Driver) Run(ctx context.Context) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return d.Group.Run(ctx)
}

package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/status"
)

// HTTPOptions configures Handler, Serve and ListenAndServe.
type HTTPOptions struct {
	// Gatherer is what /metrics exposes, normally the caller's
	// *prometheus.Registry. Nil means /metrics answers 404.
	Gatherer prometheus.Gatherer

	// Probe is what /healthz asks: nil error means 200 "ok", an error
	// means 503 with its message. Nil Probe means always healthy. Use
	// IdentityProbe to ask the driver's CSI Probe.
	Probe func(ctx context.Context) error

	// ProbeTimeout bounds one Probe call. Default 5s.
	ProbeTimeout time.Duration

	// ShutdownTimeout bounds the graceful shutdown once ctx ends: requests
	// still running after it are cut. Default 5s.
	ShutdownTimeout time.Duration

	// Logger receives server and exposition errors. Nil means discard.
	Logger *slog.Logger
}

// Handler returns the mux serving GET /metrics (promhttp on
// opts.Gatherer, continuing past collector errors) and GET /healthz.
func Handler(opts HTTPOptions) http.Handler {
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 5 * time.Second
	}
	log := opts.logger()
	mux := http.NewServeMux()
	if opts.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError,
			ErrorLog:      slogPrintln{log},
		}))
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if opts.Probe != nil {
			ctx, cancel := context.WithTimeout(r.Context(), opts.ProbeTimeout)
			defer cancel()
			if err := opts.Probe(ctx); err != nil {
				log.WarnContext(ctx, "healthz probe failed", "error", err)
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintf(w, "not ready: %v\n", err)
				return
			}
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// ListenAndServe listens on the TCP address addr (e.g. ":8080") and calls
// Serve.
func ListenAndServe(ctx context.Context, addr string, opts HTTPOptions) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	return Serve(ctx, ln, opts)
}

// Serve serves Handler(opts) on ln until ctx ends, then shuts down
// gracefully within opts.ShutdownTimeout and returns nil; it closes ln. Pass
// the context that stops the CSI server so both end together. It returns
// the server's error if serving fails first.
func Serve(ctx context.Context, ln net.Listener, opts HTTPOptions) error {
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 5 * time.Second
	}
	srv := &http.Server{
		Handler:           Handler(opts),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(opts.logger().Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		srv.Close()
		return fmt.Errorf("metrics: shutdown: %w", err)
	}
	return nil
}

// Prober is the Probe method of csi.IdentityServer.
type Prober interface {
	Probe(ctx context.Context, req *csi.ProbeRequest) (*csi.ProbeResponse, error)
}

// IdentityProbe adapts a driver's CSI Probe to HTTPOptions.Probe: an error
// or ready=false is unhealthy; an unset ready is healthy, as the spec says.
func IdentityProbe(p Prober) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		resp, err := p.Probe(ctx, &csi.ProbeRequest{})
		if err != nil {
			if s, ok := status.FromError(err); ok {
				return fmt.Errorf("probe: %s: %s", s.Code(), s.Message())
			}
			return fmt.Errorf("probe: %w", err)
		}
		if r := resp.GetReady(); r != nil && !r.GetValue() {
			return errors.New("probe: plugin is not ready yet")
		}
		return nil
	}
}

func (o HTTPOptions) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// slogPrintln adapts slog to promhttp.Logger.
type slogPrintln struct{ l *slog.Logger }

func (s slogPrintln) Println(v ...any) { s.l.Error(fmt.Sprint(v...)) }

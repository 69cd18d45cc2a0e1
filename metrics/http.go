package metrics

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// HTTPOptions configures Handler.
type HTTPOptions struct {
	// Gatherer is what /metrics exposes, normally the caller's
	// *prometheus.Registry. Nil means /metrics answers 404.
	Gatherer prometheus.Gatherer

	// Logger receives exposition errors. Nil means discard.
	Logger *slog.Logger
}

// Handler returns the handler of GET /metrics (promhttp on opts.Gatherer,
// continuing past collector errors). A driver's HTTP server, with /healthz
// and /readyz beside it, is runner's (runner.NewDriver).
func Handler(opts HTTPOptions) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	if opts.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError,
			ErrorLog:      slogPrintln{log},
		}))
	}
	return mux
}

// slogPrintln adapts slog to promhttp.Logger.
type slogPrintln struct{ l *slog.Logger }

func (s slogPrintln) Println(v ...any) { s.l.Error(fmt.Sprint(v...)) }

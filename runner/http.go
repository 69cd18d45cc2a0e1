package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// DefaultShutdownTimeout is HTTPServer.ShutdownTimeout's default.
const DefaultShutdownTimeout = 5 * time.Second

// HTTPServer is a Runnable serving Handler on Addr (or Listener) until its
// context ends, then shutting down gracefully: requests running then
// complete within ShutdownTimeout, the rest are cut.
type HTTPServer struct {
	// Addr is the TCP address to listen on, e.g. ":9808"; ignored when
	// Listener is set.
	Addr string
	// Listener, when set, is served instead of listening on Addr; Run
	// closes it.
	Listener net.Listener
	// Handler answers the requests.
	Handler http.Handler
	// ShutdownTimeout bounds the graceful shutdown (default
	// DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// Logger receives the server's errors; nil discards.
	Logger *slog.Logger
}

// Run serves until ctx ends and returns nil after a clean shutdown; it
// returns the listen or serve error when serving fails first.
func (h *HTTPServer) Run(ctx context.Context) error {
	ln := h.Listener
	if ln == nil {
		var lc net.ListenConfig
		var err error
		if ln, err = lc.Listen(ctx, "tcp", h.Addr); err != nil {
			return fmt.Errorf("http: listen %s: %w", h.Addr, err)
		}
	}
	timeout := h.ShutdownTimeout
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	log := h.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	srv := &http.Server{
		Handler:           h.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		srv.Close()
		return fmt.Errorf("http: shutdown: %w", err)
	}
	return nil
}

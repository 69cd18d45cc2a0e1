package sanity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/csi/endpoint"
)

// Target is the driver a Run tests: a driver value served in-process
// through csikit (Driver, Restartable) or any CSI driver reachable at an
// endpoint (Endpoint).
type Target struct {
	start    func() (any, csikit.Options, error)
	endpoint string
}

// Driver serves driver through csikit.NewServer(driver, opts) on a unix
// socket in a fresh temporary directory for the duration of the Run. The
// Restart area skips for it (a value cannot be restarted); use Restartable.
func Driver(driver any, opts csikit.Options) Target {
	return Target{start: func() (any, csikit.Options, error) { return driver, opts, nil }, endpoint: ""}
}

// Restartable serves what start returns like Driver, and restarts it for
// the Restart area: the harness stops the server, closes the driver if it
// implements io.Closer (else the Options.Journal, if that does: a driver
// with a Close method owns its journal) and calls start again, which must
// return a driver on the same persistent state.
func Restartable(start func() (driver any, opts csikit.Options, err error)) Target {
	return Target{start: start}
}

// Endpoint tests the CSI driver listening at ep (unix:///abs/path,
// /abs/path or tcp://host:port). It serves the Identity, Controller and
// Node services on that one endpoint.
func Endpoint(ep string) Target { return Target{endpoint: ep} }

// instance is a started target.
type instance struct {
	conn    *grpc.ClientConn
	sockDir string
	log     *LogBuffer // in-process capture, or nil
	errs    *errorLog  // every error message the driver returned

	mu   sync.Mutex
	stop func() error // stops the in-process server, nil otherwise
	tgt  Target
	sock string
}

// launch starts the target and dials it.
func (tg Target) launch(cfg *Config) (*instance, error) {
	in := &instance{tgt: tg, errs: &errorLog{}}
	addr := ""
	if tg.start == nil {
		network, a, err := endpoint.Parse(tg.endpoint)
		if err != nil {
			return nil, err
		}
		addr = "passthrough:///" + a
		if network == "unix" {
			addr = "unix://" + a
		}
	} else {
		// t.TempDir paths can exceed the 108-byte socket path limit.
		dir, err := os.MkdirTemp("", "sanity")
		if err != nil {
			return nil, err
		}
		in.sockDir = dir
		in.sock = filepath.Join(dir, "csi.sock")
		if cfg.Log == nil {
			in.log = &LogBuffer{}
		}
		if err := in.serve(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		addr = "unix://" + in.sock
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(in.errs.intercept), grpc.WithChainStreamInterceptor(in.errs.interceptStream))
	if err != nil {
		in.close()
		return nil, err
	}
	in.conn = conn
	// A driver started just before Run may not listen yet.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.CallTimeout)
	defer cancel()
	if err := in.waitReady(ctx); err != nil {
		in.close()
		return nil, fmt.Errorf("sanity: connecting to the driver: %w", err)
	}
	return in, nil
}

// waitReady waits until the connection to the driver is ready.
func (in *instance) waitReady(ctx context.Context) error {
	in.conn.ResetConnectBackoff()
	for {
		s := in.conn.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if s == connectivity.Idle || s == connectivity.TransientFailure {
			in.conn.Connect()
		}
		if !in.conn.WaitForStateChange(ctx, s) {
			return fmt.Errorf("driver not ready (connection %s): %w", s, ctx.Err())
		}
	}
}

// serve starts the in-process server on in.sock.
func (in *instance) serve() error {
	drv, opts, err := in.tgt.start()
	if err != nil {
		return fmt.Errorf("sanity: starting the driver: %w", err)
	}
	if opts.Logger == nil && in.log != nil {
		opts.Logger = slog.New(slog.NewJSONHandler(in.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 5 * time.Second
	}
	srv, err := csikit.NewServer(drv, opts)
	if err != nil {
		closeDriver(drv, opts.Journal)
		return fmt.Errorf("sanity: csikit.NewServer: %w", err)
	}
	lis, err := net.Listen("unix", in.sock)
	if err != nil {
		closeDriver(drv, opts.Journal)
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis) }()
	in.mu.Lock()
	in.stop = func() error {
		cancel()
		err := <-done
		return errors.Join(err, closeDriver(drv, opts.Journal))
	}
	in.mu.Unlock()
	return nil
}

// closeDriver closes the driver if it is an io.Closer, else the journal
// if that is one.
func closeDriver(drv, journal any) error {
	if c, ok := drv.(io.Closer); ok {
		return c.Close()
	}
	if c, ok := journal.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// canRestart reports whether restart can work, and why not.
func (in *instance) canRestart(cfg *Config) (bool, string) {
	if in.tgt.start != nil || cfg.Restart != nil {
		return true, ""
	}
	if in.tgt.endpoint != "" {
		return false, "no Config.Restart hook for this endpoint"
	}
	return false, "sanity.Driver targets cannot restart: build the target with sanity.Restartable"
}

// restart stops the driver and starts it again, then waits until the
// connection is ready.
func (in *instance) restart(ctx context.Context, cfg *Config) error {
	switch {
	case cfg.Restart != nil:
		if err := cfg.Restart(ctx); err != nil {
			return fmt.Errorf("Config.Restart: %w", err)
		}
	case in.tgt.start != nil:
		in.mu.Lock()
		stop := in.stop
		in.stop = nil
		in.mu.Unlock()
		if stop != nil {
			if err := stop(); err != nil {
				return fmt.Errorf("stopping the driver: %w", err)
			}
		}
		if err := in.serve(); err != nil {
			return err
		}
	default:
		return errors.New("no restart hook")
	}
	return in.waitReady(ctx)
}

// close stops everything launch started.
func (in *instance) close() error {
	var errs []error
	if in.conn != nil {
		errs = append(errs, in.conn.Close())
	}
	in.mu.Lock()
	stop := in.stop
	in.stop = nil
	in.mu.Unlock()
	if stop != nil {
		errs = append(errs, stop())
	}
	if in.sockDir != "" {
		errs = append(errs, os.RemoveAll(in.sockDir))
	}
	return errors.Join(errs...)
}

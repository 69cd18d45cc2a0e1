// Package runner runs a driver's long-running parts — the CSI server, the
// metrics and health HTTP server, kubelet plugin registration, a periodic
// sweep, anything of the driver's own — under one context, stops them in
// order, and answers one health check for all of them.
//
// It is a small cousin of controller-runtime's Manager: parts are added in
// the order they start; when the context ends or any part fails, they are
// stopped one at a time in reverse order, each given the chance to return
// before the next is told to stop. So a driver adds its metrics server
// first and its CSI server after it: at shutdown the CSI server drains
// while /healthz still answers, and /metrics sees the last calls.
//
//	g := runner.New(runner.Options{Logger: logger})
//	g.Add("metrics", runner.Func(func(ctx context.Context) error {
//		return metrics.ListenAndServe(ctx, ":8080", metrics.HTTPOptions{Gatherer: reg, Probe: g.Check})
//	}))
//	g.Add("csi", runner.Func(func(ctx context.Context) error { return srv.ListenAndServe(ctx, endpoint) }),
//		runner.WithCheck(metrics.IdentityProbe(srv)))
//	g.Add("sweep", runner.Every(time.Hour, sweepOnce))
//	err := g.Run(ctx)
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Runnable is a long-running part of a driver. Run returns when ctx is
// done (nil or ctx's error, both count as a clean stop) or when the part
// fails (any other error, which stops the whole group).
type Runnable interface {
	Run(ctx context.Context) error
}

// Func adapts a function to Runnable.
type Func func(ctx context.Context) error

// Run calls f.
func (f Func) Run(ctx context.Context) error { return f(ctx) }

// Checker is implemented by parts that can tell whether they are healthy;
// Group.Check calls it. A nil error means healthy.
type Checker interface {
	Check(ctx context.Context) error
}

// Options configure a Group. The zero value is ready to use.
type Options struct {
	// Logger gets a line when a part starts, stops or fails; nil discards.
	Logger *slog.Logger
	// StopTimeout bounds how long shutdown waits for one part to return
	// after its context was cancelled before moving on to the next
	// (default 45s; the CSI server's own drain is 30s by default). A part
	// that overruns is reported in Run's error and left running.
	StopTimeout time.Duration
}

// DefaultStopTimeout is Options.StopTimeout's default.
const DefaultStopTimeout = 45 * time.Second

// AddOption changes how a part is added.
type AddOption func(*part)

// WithCheck gives the part a health check (in addition to Checker, if the
// Runnable implements it).
func WithCheck(check func(ctx context.Context) error) AddOption {
	return func(p *part) { p.checks = append(p.checks, check) }
}

type part struct {
	name   string
	r      Runnable
	checks []func(ctx context.Context) error

	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done is closed
}

// Group runs parts together. Create it with New, add parts with Add, then
// call Run once.
type Group struct {
	opts  Options
	log   *slog.Logger
	mu    sync.Mutex
	parts []*part
	state int // 0 adding, 1 running, 2 stopped
}

// New returns an empty Group.
func New(opts Options) *Group {
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Group{opts: opts, log: log}
}

// Add adds a part under a name used in logs, errors and health answers.
// Parts start in the order they were added and stop in reverse order. Add
// panics when called after Run started or with a nil Runnable, both
// programming errors.
func (g *Group) Add(name string, r Runnable, opts ...AddOption) {
	if r == nil {
		panic("runner: Add(" + name + ") with a nil Runnable")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != 0 {
		panic("runner: Add(" + name + ") after Run")
	}
	p := &part{name: name, r: r}
	if c, ok := r.(Checker); ok {
		p.checks = append(p.checks, c.Check)
	}
	for _, o := range opts {
		o(p)
	}
	g.parts = append(g.parts, p)
}

// Run starts every part and blocks until ctx is done or a part fails (or
// returns early), then stops the rest in reverse order of Add. It returns
// nil after a clean stop, and otherwise the failures, each naming its part.
// Run may be called once.
func (g *Group) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.state != 0 {
		g.mu.Unlock()
		return errors.New("runner: Run called twice")
	}
	parts := g.parts
	ctxs := make([]context.Context, len(parts))
	for i, p := range parts {
		// Each part is cancelled on its own, in order, not with ctx.
		ctxs[i], p.cancel = context.WithCancel(context.WithoutCancel(ctx))
		p.done = make(chan struct{})
	}
	g.state = 1
	g.mu.Unlock()
	if len(parts) == 0 {
		<-ctx.Done()
		g.setStopped()
		return nil
	}

	exited := make(chan *part, len(parts))
	for i, p := range parts {
		pctx := ctxs[i]
		g.log.Debug("starting", "part", p.name)
		go func(p *part) {
			p.err = runSafely(pctx, p.r)
			close(p.done)
			exited <- p
		}(p)
	}

	var errs []error
	var first *part // the part whose early exit ended the group
	select {
	case <-ctx.Done():
	case p := <-exited:
		first = p
		// One part ended on its own: that ends the group.
		if err := stopErr(p.err, false); err != nil {
			g.log.Error("part failed; stopping the others", "part", p.name, "error", err)
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
		} else {
			g.log.Error("part returned while the group was running; stopping the others", "part", p.name)
			errs = append(errs, fmt.Errorf("%s: returned before shutdown", p.name))
		}
	}

	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		p.cancel()
		select {
		case <-p.done:
		case <-time.After(g.opts.StopTimeout):
			errs = append(errs, fmt.Errorf("%s: still running %v after it was told to stop", p.name, g.opts.StopTimeout))
			continue
		}
		if err := stopErr(p.err, true); err != nil && p != first {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
		}
		g.log.Debug("stopped", "part", p.name)
	}
	g.setStopped()
	return errors.Join(errs...)
}

func (g *Group) setStopped() {
	g.mu.Lock()
	g.state = 2
	g.mu.Unlock()
}

// Check answers for the whole group: nil while it runs and every part's
// health check passes; otherwise an error naming each part that is
// unhealthy or has exited. Use it as the /healthz probe
// (metrics.HTTPOptions.Probe).
func (g *Group) Check(ctx context.Context) error {
	g.mu.Lock()
	state, parts := g.state, g.parts
	g.mu.Unlock()
	switch state {
	case 0:
		return errors.New("not started")
	case 2:
		return errors.New("stopped")
	}
	var errs []error
	for _, p := range parts {
		select {
		case <-p.done:
			errs = append(errs, fmt.Errorf("%s: exited", p.name))
			continue
		default:
		}
		for _, c := range p.checks {
			if err := c(ctx); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// stopErr filters a part's return: during shutdown, its context's
// cancellation is a clean stop.
func stopErr(err error, stopping bool) error {
	if err == nil || (stopping && errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

// runSafely turns a part's panic into its error, so one part cannot take
// the process down without the others being stopped in order.
func runSafely(ctx context.Context, r Runnable) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return r.Run(ctx)
}

// Every returns a Runnable that calls f at once and then every interval
// until its context is done. An error from f goes to onError (nil ignores
// it) and does not stop the part: a periodic task such as
// journal.Sweep tries again next time.
func Every(interval time.Duration, f func(ctx context.Context) error, onError func(error)) Runnable {
	return Func(func(ctx context.Context) error {
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
			if err := f(ctx); err != nil && ctx.Err() == nil && onError != nil {
				onError(err)
			}
			t.Reset(interval)
		}
	})
}

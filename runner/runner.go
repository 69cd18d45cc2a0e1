// Package runner runs a driver's long-running parts — the CSI server, the
// HTTP server for /metrics, /healthz and /readyz, kubelet plugin
// registration, a periodic sweep, anything of the driver's own — under one
// context, stops them in order, and answers named health checks for them.
//
// It is a small cousin of controller-runtime's Manager: parts are added in
// the order they start; when the context ends or any part fails, they are
// stopped one at a time in reverse order, each given the chance to return
// before the next is told to stop. So a driver adds its HTTP server first
// and its CSI server after it: at shutdown the CSI server drains while
// /healthz still answers, and /metrics sees the last calls.
//
// NewDriver wires a CSI driver's standard parts in that order from one
// options struct, with the checks every driver wants (the CSI server's
// Probe, the journal, kubelet registration); a driver's main parses its
// flags, builds its driver and csikit.Server, and calls Driver.Run:
//
//	d, err := runner.NewDriver(runner.DriverOptions{
//		Server: srv, Endpoint: "unix:///csi/csi.sock", HTTPAddress: ":9808", Metrics: reg,
//		Sweep: sweepOnce, Logger: logger,
//	})
//	if err != nil {
//		return err
//	}
//	return d.Run(ctx) // until ctx ends, SIGINT or SIGTERM
//
// Health is one idea here: a Group's liveness checks (every part's, and
// those added with AddHealthzCheck) answer /healthz, and its readiness
// checks (the liveness checks, the group not shutting down, and those added
// with AddReadyzCheck) answer /readyz, each by name (Group.HealthHandler).
// The volume-health entries of the CSI health RPCs are package health's.
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
// Group.Check calls it as the part's liveness check. A nil error means
// healthy.
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

// WithCheck gives the part a liveness check (in addition to Checker, if the
// Runnable implements it), answered under the part's name.
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
	opts   Options
	log    *slog.Logger
	mu     sync.Mutex
	parts  []*part
	checks []namedCheck // added with AddHealthzCheck and AddReadyzCheck
	state  int          // 0 adding, 1 running, 2 stopped
	// stopping is set once shutdown began: the group is no longer ready.
	stopping bool
}

// namedCheck is a check added by name; ready marks a readiness-only one.
type namedCheck struct {
	name  string
	check func(ctx context.Context) error
	ready bool
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
	g.mustBeNewName(name)
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
	defer g.setStopped()
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

	g.mu.Lock()
	g.stopping = true
	g.mu.Unlock()
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
	return errors.Join(errs...)
}

func (g *Group) setStopped() {
	g.mu.Lock()
	g.state = 2
	g.mu.Unlock()
}

// AddHealthzCheck adds a named liveness check: /healthz (and so /readyz)
// fails while it does. Use it for what a restart of the process would cure.
// Like Add, it panics after Run started, or when name is already a part's
// or a check's.
func (g *Group) AddHealthzCheck(name string, check func(ctx context.Context) error) {
	g.addCheck(namedCheck{name: name, check: check})
}

// AddReadyzCheck adds a named readiness check: /readyz fails while it does,
// /healthz does not. Use it for what the process waits out on its own (a
// backend not reachable yet). It panics as AddHealthzCheck does.
func (g *Group) AddReadyzCheck(name string, check func(ctx context.Context) error) {
	g.addCheck(namedCheck{name: name, check: check, ready: true})
}

func (g *Group) addCheck(c namedCheck) {
	if c.check == nil {
		panic("runner: check " + c.name + " is nil")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != 0 {
		panic("runner: check " + c.name + " added after Run")
	}
	g.mustBeNewName(c.name)
	g.checks = append(g.checks, c)
}

// mustBeNewName panics when name is taken; g.mu is held.
func (g *Group) mustBeNewName(name string) {
	if name == "" {
		panic("runner: empty name")
	}
	for _, p := range g.parts {
		if p.name == name {
			panic("runner: name " + name + " added twice")
		}
	}
	for _, c := range g.checks {
		if c.name == name {
			panic("runner: name " + name + " added twice")
		}
	}
}

// CheckResult is one named check's answer: Err nil means it passed.
type CheckResult struct {
	Name string
	Err  error
}

// Results runs the liveness checks (readiness false) or the readiness
// checks (readiness true) and returns each one's answer, in the order the
// parts and checks were added; readiness checks first name "running",
// which fails before Run and once shutdown began. A part that exited fails
// its own name. Before Run and after it returned, the only answer is
// "running".
func (g *Group) Results(ctx context.Context, readiness bool) []CheckResult {
	g.mu.Lock()
	state, stopping, parts, checks := g.state, g.stopping, g.parts, g.checks
	g.mu.Unlock()
	switch {
	case state == 0:
		return []CheckResult{{Name: "running", Err: errors.New("not started")}}
	case state == 2:
		return []CheckResult{{Name: "running", Err: errors.New("stopped")}}
	}
	var out []CheckResult
	if readiness {
		var err error
		if stopping {
			err = errors.New("shutting down")
		}
		out = append(out, CheckResult{Name: "running", Err: err})
	}
	for _, p := range parts {
		r := CheckResult{Name: p.name}
		select {
		case <-p.done:
			r.Err = errors.New("exited")
		default:
			var errs []error
			for _, c := range p.checks {
				errs = append(errs, c(ctx))
			}
			r.Err = errors.Join(errs...)
		}
		out = append(out, r)
	}
	for _, c := range checks {
		if c.ready && !readiness {
			continue
		}
		out = append(out, CheckResult{Name: c.name, Err: c.check(ctx)})
	}
	return out
}

// Check answers for the whole group's liveness: nil while it runs and every
// liveness check passes; otherwise an error naming each failing check (a
// part that exited, a part's own check, a check added with
// AddHealthzCheck). It is what /healthz asks.
func (g *Group) Check(ctx context.Context) error {
	return joinFailed(g.Results(ctx, false))
}

// Ready answers for the whole group's readiness: Check, and the group is
// not shutting down, and every check added with AddReadyzCheck passes. It
// is what /readyz asks.
func (g *Group) Ready(ctx context.Context) error {
	return joinFailed(g.Results(ctx, true))
}

func joinFailed(rs []CheckResult) error {
	var errs []error
	for _, r := range rs {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Name, r.Err))
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

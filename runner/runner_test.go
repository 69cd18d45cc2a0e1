package runner_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/csikit/csikit/runner"
)

// recorder notes the order in which parts start and stop.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(e string) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.events, " ")
}

// part runs until its context is done, taking a little time to stop so a
// wrong stop order shows.
func (r *recorder) part(name string, started chan<- struct{}) runner.Runnable {
	return runner.Func(func(ctx context.Context) error {
		r.add("start:" + name)
		if started != nil {
			started <- struct{}{}
		}
		<-ctx.Done()
		time.Sleep(5 * time.Millisecond)
		r.add("stop:" + name)
		return ctx.Err()
	})
}

func TestStopsInReverseOrder(t *testing.T) {
	var rec recorder
	started := make(chan struct{}, 3)
	g := runner.New(runner.Options{})
	for _, n := range []string{"metrics", "csi", "sweep"} {
		g.Add(n, rec.part(n, started))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- g.Run(ctx) }()
	for range 3 {
		<-started
	}
	if err := g.Check(ctx); err != nil {
		t.Fatalf("Check while running: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after a clean stop: %v", err)
	}
	got := rec.String()
	if !strings.HasSuffix(got, "stop:sweep stop:csi stop:metrics") {
		t.Fatalf("stop order: %s", got)
	}
	if err := g.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("Check after Run: %v, want stopped", err)
	}
}

func TestFailureStopsTheOthers(t *testing.T) {
	var rec recorder
	started := make(chan struct{}, 2)
	g := runner.New(runner.Options{})
	g.Add("metrics", rec.part("metrics", started))
	g.Add("csi", rec.part("csi", started))
	g.Add("registration", runner.Func(func(ctx context.Context) error {
		<-started
		<-started
		return errors.New("kubelet socket gone")
	}))
	err := g.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "registration: kubelet socket gone") {
		t.Fatalf("Run: %v, want the failing part named", err)
	}
	if strings.Count(err.Error(), "kubelet socket gone") != 1 {
		t.Fatalf("failure reported more than once: %v", err)
	}
	if got := rec.String(); !strings.HasSuffix(got, "stop:csi stop:metrics") {
		t.Fatalf("stop order: %s", got)
	}
}

func TestEarlyCleanReturnIsAnError(t *testing.T) {
	g := runner.New(runner.Options{})
	g.Add("oneshot", runner.Func(func(context.Context) error { return nil }))
	if err := g.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "oneshot: returned before shutdown") {
		t.Fatalf("Run: %v", err)
	}
}

func TestPanicIsContained(t *testing.T) {
	var stopped atomic.Bool
	g := runner.New(runner.Options{})
	g.Add("steady", runner.Func(func(ctx context.Context) error {
		<-ctx.Done()
		stopped.Store(true)
		return nil
	}))
	g.Add("buggy", runner.Func(func(context.Context) error { panic("nil map") }))
	err := g.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "buggy: panic: nil map") {
		t.Fatalf("Run: %v", err)
	}
	if !stopped.Load() {
		t.Fatal("the steady part was not stopped")
	}
}

func TestStopTimeoutNamesTheStuckPart(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	g := runner.New(runner.Options{StopTimeout: 20 * time.Millisecond})
	g.Add("stuck", runner.Func(func(context.Context) error { <-release; return nil }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Run(ctx); err == nil || !strings.Contains(err.Error(), "stuck: still running") {
		t.Fatalf("Run: %v", err)
	}
}

type checked struct{ err atomic.Pointer[error] }

func (c *checked) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (c *checked) Check(context.Context) error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

func TestCheckJoinsEveryPart(t *testing.T) {
	var c checked
	var regErr atomic.Pointer[error]
	g := runner.New(runner.Options{})
	if err := g.Check(context.Background()); err == nil {
		t.Fatal("Check before Run: want not started")
	}
	g.Add("csi", &c)
	g.Add("registration", runner.Func(func(ctx context.Context) error { <-ctx.Done(); return nil }),
		runner.WithCheck(func(context.Context) error {
			if p := regErr.Load(); p != nil {
				return *p
			}
			return nil
		}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- g.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for g.Check(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("never healthy: %v", g.Check(ctx))
		}
		time.Sleep(time.Millisecond)
	}
	e1, e2 := errors.New("journal poisoned"), errors.New("kubelet: plugin rejected")
	c.err.Store(&e1)
	regErr.Store(&e2)
	err := g.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), "csi: journal poisoned") || !strings.Contains(err.Error(), "registration: kubelet: plugin rejected") {
		t.Fatalf("Check: %v, want both parts named", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestEveryRunsAtOnceThenPeriodically(t *testing.T) {
	var n atomic.Int32
	var errs atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	r := runner.Every(time.Millisecond, func(context.Context) error {
		if n.Add(1) >= 3 {
			cancel()
		}
		return errors.New("backend busy")
	}, func(error) { errs.Add(1) })
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n.Load() < 3 || errs.Load() < 2 {
		t.Fatalf("ran %d times, %d errors reported", n.Load(), errs.Load())
	}
}

func TestRunTwice(t *testing.T) {
	g := runner.New(runner.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Run(ctx); err == nil {
		t.Fatal("second Run: want an error")
	}
}

package kube

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// WaitFor polls cond every 100ms until it reports done, and fails t when
// timeout passes first, with what and the last state or error cond gave.
// cond's ctx ends at the timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (done bool, state string, err error)) {
	t.Helper()
	if err := Poll(context.Background(), timeout, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Poll is WaitFor returning an error instead of failing a test.
func Poll(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) (done bool, state string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		done, state, err := cond(ctx)
		if done && err == nil {
			return nil
		}
		last = state
		if err != nil {
			last = fmt.Sprintf("%s (error: %v)", state, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s; last: %s", timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

// TestHostLock: a second holder waits while the first holds the lock, gets
// it once the first releases it, and gives up with DeadlineExceeded after
// its wait. (A name of its own: a kubelet-mode run elsewhere on the host
// holds the real one.)
func TestHostLock(t *testing.T) {
	name := fmt.Sprintf("@csikit-sanity-kube-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	ctx := context.Background()
	var logged []string
	logf := func(f string, a ...any) { logged = append(logged, fmt.Sprintf(f, a...)) }
	first, err := acquireHostLock(ctx, name, time.Second, logf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acquireHostLock(ctx, name, 300*time.Millisecond, logf); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second holder while the first holds it: %v, want DeadlineExceeded", err)
	}
	time.AfterFunc(700*time.Millisecond, func() { first.Close() })
	start := time.Now()
	second, err := acquireHostLock(ctx, name, 10*time.Second, logf)
	if err != nil {
		t.Fatalf("after the first released it: %v", err)
	}
	defer second.Close()
	if time.Since(start) < 500*time.Millisecond {
		t.Errorf("acquired after %s, before the first holder released it", time.Since(start))
	}
	if len(logged) < 3 {
		t.Errorf("waits not reported: %q", logged)
	}
}

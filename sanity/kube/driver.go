package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/csikit/csikit"
)

// Driver serves a csikit driver in-process on a unix socket, for Start's
// Endpoint. Stop and Start simulate a driver crash and restart: the socket
// disappears, the sidecars lose their connection, and a fresh Server (from
// the same constructor) serves the same socket again.
type Driver struct {
	// Endpoint is unix://<socket>, stable across restarts.
	Endpoint string

	newServer func() (*csikit.Server, error)
	sock      string
	mu        sync.Mutex
	cancel    context.CancelFunc
	done      chan error
}

// ServeDriver serves the Server that newServer builds (called again on every
// Start, as a Server serves once) and stops it on t's Cleanup.
func ServeDriver(t testing.TB, newServer func() (*csikit.Server, error)) *Driver {
	t.Helper()
	dir, err := os.MkdirTemp("", "csikit-drv-")
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{newServer: newServer, sock: filepath.Join(dir, "csi.sock")}
	d.Endpoint = "unix://" + d.sock
	t.Cleanup(func() {
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
		os.RemoveAll(dir)
	})
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	return d
}

// Start serves a new Server on Endpoint; a no-op while serving.
func (d *Driver) Start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel != nil {
		return nil
	}
	srv, err := d.newServer()
	if err != nil {
		return fmt.Errorf("kube: driver: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(ready)
		done <- srv.ListenAndServe(ctx, d.Endpoint)
	}()
	<-ready
	// Wait for the socket so the caller can dial at once.
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(d.sock); err == nil {
			break
		}
		select {
		case err := <-done:
			cancel()
			return fmt.Errorf("kube: driver: %v", err)
		default:
		}
		sleepBrief()
	}
	d.cancel, d.done = cancel, done
	return nil
}

// Stop ends serving (in-flight calls are drained per the Server's options)
// and waits for the socket to be gone; a no-op when stopped.
func (d *Driver) Stop() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel == nil {
		return nil
	}
	d.cancel()
	err := <-d.done
	d.cancel, d.done = nil, nil
	if err != nil {
		return fmt.Errorf("kube: driver: %w", err)
	}
	return nil
}

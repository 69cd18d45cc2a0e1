//go:build linux

package sanity_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/sanity"
)

// TestEndpoint runs the harness over an endpoint, as for a driver in
// another process or language, with a Config.Restart hook that stops and
// restarts the server on the same state.
func TestEndpoint(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	sockDir, err := os.MkdirTemp("", "sanity-ep")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "csi.sock")
	log := &sanity.LogBuffer{}

	var stop func()
	start := func() {
		srv, err := csikit.NewServer(newRefDriver(dir, nil, ""), csikit.Options{Name: "ref.sanity.csikit.dev", Version: "v1.0.0", NodeID: "node-1", Clone: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.ListenAndServe(ctx, "unix://"+sock) }()
		stop = func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serving: %v", err)
			}
		}
	}
	start()
	t.Cleanup(func() { stop() })

	sanity.Run(t, sanity.Endpoint("unix://"+sock), sanity.Config{
		Areas: sanity.Identity | sanity.Controller | sanity.Node | sanity.Restart | sanity.Hygiene,
		Log:   log.Bytes,
		Restart: func(context.Context) error {
			stop()
			start()
			return nil
		},
	})
}

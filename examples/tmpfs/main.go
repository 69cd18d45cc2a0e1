//go:build linux

// Command tmpfs is csikit's mid-sized example: a controller and node plugin
// whose volumes are size-limited tmpfs mounts in this node's memory, with
// names made idempotent by the journal, sizes by the capacity package and
// its parts run by runner.
//
//	go run ./examples/tmpfs --state-dir /var/lib/csikit-tmpfs
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/capacity"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/mount"
	"github.com/csikit/csikit/runner"
)

// open opens the driver's state below dir and returns it with the server
// options it needs; the caller closes the journal.
func open(dir, nodeID string, maxSize int64) (*driver, *journal.File, csikit.Options, error) {
	if err := os.MkdirAll(filepath.Join(dir, "volumes"), 0o700); err != nil {
		return nil, nil, csikit.Options{}, err
	}
	j, err := journal.OpenFile(filepath.Join(dir, "journal"), journal.FileOptions{})
	if err != nil {
		return nil, nil, csikit.Options{}, err
	}
	sizes, err := j.KV("sizes")
	if err != nil {
		j.Close()
		return nil, nil, csikit.Options{}, err
	}
	d := &driver{
		dir: filepath.Join(dir, "volumes"), nodeID: nodeID, sizes: sizes, m: mount.New(mount.Options{}),
		sizing: capacity.Options{Default: 64 << 20, Granularity: int64(os.Getpagesize()), Max: maxSize},
	}
	return d, j, csikit.Options{
		Name: "tmpfs.csikit.dev", Version: "v0.1.0", NodeID: nodeID, Journal: j,
		Topology: map[string]string{topologyKey: nodeID},
	}, nil
}

func main() {
	host, _ := os.Hostname()
	endpoint := flag.String("endpoint", "unix:///run/csikit-tmpfs/csi.sock", "CSI endpoint")
	nodeID := flag.String("nodeid", host, "node ID")
	state := flag.String("state-dir", "/var/lib/csikit-tmpfs", "journal and volume mounts")
	maxSize := flag.Int64("max-volume-size", 1<<30, "largest volume in bytes")
	var level slog.Level
	flag.TextVar(&level, "log-level", slog.LevelInfo, "debug, info, warn or error")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := run(ctx, logger, *endpoint, *state, *nodeID, *maxSize); err != nil {
		fmt.Fprintln(os.Stderr, "tmpfs:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *slog.Logger, endpoint, state, nodeID string, maxSize int64) error {
	d, j, opts, err := open(state, nodeID, maxSize)
	if err != nil {
		return err
	}
	defer j.Close()
	opts.Logger = logger
	srv, err := csikit.NewServer(d, opts)
	if err != nil {
		return err
	}
	r, err := runner.NewDriver(runner.DriverOptions{Server: srv, Endpoint: endpoint, Logger: logger})
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

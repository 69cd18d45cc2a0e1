//go:build linux

// Command hostpath is csikit's reference CSI driver: volumes are
// directories, loop-backed block devices, or ext4/xfs filesystems on
// loop-backed files under one state directory of this node.
//
// With no flags it serves on a default socket, with the hostname as node
// ID and state in a default directory, and prints where:
//
//	go run ./examples/hostpath
//
// The flags other tooling relies on: --endpoint, --nodeid, --state-dir,
// --driver-name, --metrics-address, --max-volumes-per-node, --capacity,
// --enable-attach, --enable-modify, --mutable-parameters, --log-level,
// --kubelet-registration-path, --kubelet-registration-dir.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/hostpath/driver"
	"github.com/csikit/csikit/k8s/csidriver"
	"github.com/csikit/csikit/k8s/registration"
	"github.com/csikit/csikit/runner"
)

// serverOptions are the csikit options the flags select (without the
// driver's journal and the metrics registry).
func serverOptions(cfg *config, logger *slog.Logger) csikit.Options {
	return csikit.Options{
		Name: cfg.driverName, Version: version(), NodeID: cfg.nodeID,
		MaxVolumesPerNode: cfg.maxVolumes,
		Topology:          map[string]string{driver.TopologyKey: cfg.nodeID},
		VolumeModes:       csikit.Mount | csikit.Block,
		AccessModes:       driver.AccessModes(),
		Clone:             true, SingleNodeMultiWriter: true,
		Alpha:  true, // GET_VOLUME, GET_SNAPSHOT and the health RPCs are alpha in CSI v1.14
		Logger: logger,
		// One driver type: attach and modify are switched off unless flagged.
		Disable: driver.Options{EnableAttach: cfg.enableAttach, EnableModify: cfg.enableModify}.Disabled(),
	}
}

// config is everything the flags set.
type config struct {
	endpoint, nodeID, stateDir, driverName, metricsAddr, logLevel, mutable string
	kubeletRegistration, kubeletRegistrationDir                            string
	maxVolumes, capacity                                                   int64
	enableAttach, enableModify, printCSIDriver, showVersion                bool
	// defaultStateDir is set when --state-dir was not given.
	defaultStateDir bool
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hostpath:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	if cfg.showVersion {
		fmt.Println(version())
		return nil
	}
	logger, err := newLogger(cfg.logLevel)
	if err != nil {
		return err
	}
	// runner stops the driver on SIGINT and SIGTERM once it serves.
	ctx := context.Background()

	dopts := driver.Options{
		StateDir: cfg.stateDir, NodeID: cfg.nodeID, Capacity: cfg.capacity,
		MaxVolumesPerNode: cfg.maxVolumes, EnableAttach: cfg.enableAttach, EnableModify: cfg.enableModify,
		MutableParameters: splitList(cfg.mutable), Logger: logger,
	}
	if cfg.printCSIDriver {
		// Capabilities depend on the flags only: touch no state.
		srv, err := csikit.NewServer((*driver.Driver)(nil), serverOptions(cfg, logger))
		if err != nil {
			return err
		}
		obj, err := srv.CSIDriver(csidriver.Options{LifecycleModes: []csidriver.LifecycleMode{csidriver.Persistent, csidriver.Ephemeral}})
		if err != nil {
			return err
		}
		y, err := obj.YAML()
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(y)
		return err
	}
	_, statErr := os.Stat(cfg.stateDir)
	existed := statErr == nil
	d, err := driver.New(ctx, dopts)
	if err != nil {
		return err
	}
	defer d.Close()

	opts := serverOptions(cfg, logger)
	opts.Journal = d.Journal()
	// The group delete locks the members the driver recorded, not only
	// those the request lists.
	opts.LockKeys = d.LockKeys()
	var reg prometheus.Gatherer
	if cfg.metricsAddr != "" {
		r := prometheus.NewRegistry()
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		opts.Registry, reg = r, r
	}
	srv, err := csikit.NewServer(d, opts)
	if err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "hostpath %s: driver %s on node %s, serving %s, state in %s\n",
		version(), cfg.driverName, cfg.nodeID, cfg.endpoint, cfg.stateDir)
	fmt.Fprintln(os.Stderr, stateNotice(cfg, existed))
	var kubelet *registration.Options
	if cfg.kubeletRegistration != "" {
		kubelet = &registration.Options{DriverName: cfg.driverName, Endpoint: cfg.kubeletRegistration, Dir: cfg.kubeletRegistrationDir}
	}
	// The sweep releases, at start and then hourly, the journal
	// reservations of creates that failed a day or more ago and were never
	// retried to success (their PVC was deleted meanwhile), with what they
	// left on disk.
	r, err := runner.NewDriver(runner.DriverOptions{
		Server: srv, Endpoint: cfg.endpoint, HTTPAddress: cfg.metricsAddr, Metrics: reg, Registration: kubelet,
		Sweep: func(ctx context.Context) error {
			_, err := d.SweepAbandoned(ctx, srv.Locks(), 24*time.Hour)
			return err
		},
		Logger: logger,
	})
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// stateNotice says, at start, where the driver keeps its state, that it
// outlives the process, and how to choose another directory or be rid of
// it: `go run ./examples/hostpath` otherwise leaves a directory behind
// without a word. existed tells a directory from an earlier run from a
// new one.
func stateNotice(cfg *config, existed bool) string {
	how := "created"
	if existed {
		how = "reused from an earlier run"
	}
	msg := fmt.Sprintf("hostpath: state directory %s (%s): volumes, snapshots and the journal stay there after the driver stops, "+
		"and the next run with the same --state-dir finds them", cfg.stateDir, how)
	if cfg.defaultStateDir {
		msg += "; choose another with --state-dir"
	}
	return msg + fmt.Sprintf("; to remove it: stop the driver, unmount anything still mounted below it, then rm -r %s", cfg.stateDir)
}

// defaultStateDir is where the driver keeps its state without --state-dir:
// /var/lib/csikit-hostpath as root, else below the temporary directory.
func defaultStateDir() string {
	if os.Geteuid() != 0 {
		return filepath.Join(os.TempDir(), "csikit-hostpath")
	}
	return "/var/lib/csikit-hostpath"
}

func parseFlags(args []string) (*config, error) {
	host, _ := os.Hostname()
	defState := defaultStateDir()
	c := &config{}
	fs := flag.NewFlagSet("hostpath", flag.ContinueOnError)
	fs.StringVar(&c.endpoint, "endpoint", "", "CSI endpoint: unix:///abs/path, /abs/path or tcp://host:port (default unix://<state-dir>/csi.sock)")
	fs.StringVar(&c.nodeID, "nodeid", host, "node ID")
	fs.StringVar(&c.stateDir, "state-dir", defState, "directory holding volumes, snapshots and state")
	fs.StringVar(&c.driverName, "driver-name", "hostpath.csikit.dev", "CSI driver name")
	fs.StringVar(&c.metricsAddr, "metrics-address", "", "address for /metrics, /healthz and /readyz (empty = off)")
	fs.Int64Var(&c.maxVolumes, "max-volumes-per-node", 0, "attach limit per node (0 = none)")
	fs.Int64Var(&c.capacity, "capacity", 0, "total bytes offered (0 = the free space of the state directory)")
	fs.BoolVar(&c.enableAttach, "enable-attach", false, "implement ControllerPublish/Unpublish")
	fs.BoolVar(&c.enableModify, "enable-modify", false, "implement ControllerModifyVolume")
	fs.StringVar(&c.mutable, "mutable-parameters", "", "comma-separated parameters ControllerModifyVolume may change (empty = all)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&c.printCSIDriver, "print-csidriver", false, "print the CSIDriver object for these flags as YAML and exit")
	fs.BoolVar(&c.showVersion, "version", false, "print the version and exit")
	fs.StringVar(&c.kubeletRegistration, "kubelet-registration-path", "", "register with kubelet directly (no node-driver-registrar): the CSI socket's path on the host, e.g. /var/lib/kubelet/plugins/hostpath.csikit.dev/csi.sock")
	fs.StringVar(&c.kubeletRegistrationDir, "kubelet-registration-dir", registration.DefaultDir, "kubelet's plugin registration directory (for a kubelet with a non-default --root-dir)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	c.defaultStateDir = true
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "state-dir" {
			c.defaultStateDir = false
		}
	})
	abs, err := filepath.Abs(c.stateDir)
	if err != nil {
		return nil, err
	}
	c.stateDir = abs
	if c.endpoint == "" {
		c.endpoint = "unix://" + filepath.Join(c.stateDir, "csi.sock")
	}
	if c.nodeID == "" {
		return nil, errors.New("--nodeid is required (the hostname is unknown)")
	}
	return c, nil
}

func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// version is the module version the binary was built from, or a
// development marker; never empty (every CSI sidecar refuses an empty one).
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "v0.1.0-dev"
}

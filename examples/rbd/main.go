//go:build linux

// Command rbd is csikit's Ceph RBD CSI driver: volumes are RBD images,
// snapshots RBD snapshots, restores clone-v2 images, the idempotency
// journal RADOS omap objects in each pool; nodes map images with krbd,
// rbd-nbd or rbd-fuse plus a loop device.
//
//	rbd --monitors 10.0.0.1:3300 --endpoint unix:///csi/csi.sock --nodeid $(hostname)
//
// On a node it registers itself with kubelet (--kubelet-registration-path,
// no node-driver-registrar) and serves /healthz, /readyz and /metrics
// (--metrics-address, no livenessprobe sidecar).
//
// Ceph credentials come from the CSI secrets of each request (userID,
// userKey); no flag holds a key. --secrets-dir names a mounted Secret
// (files userID and userKey) for the work no request brings secrets to:
// lifting and renewing fences after a restart, registering a node. Build with
// -tags pacific (or the tag of the Ceph release whose librbd you link).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/csikit/csikit"
	"github.com/csikit/csikit/examples/rbd/driver"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/k8s/csidriver"
	"github.com/csikit/csikit/k8s/registration"
	"github.com/csikit/csikit/runner"
)

type config struct {
	endpoint, monitors, pool, nodeID, zone, stateDir, mapper, driverName, logLevel string
	secretsDir, nbdLockFile                                                        string
	metricsAddr, kubeletRegistration, kubeletRegistrationDir                       string
	cloneDepth                                                                     int
	timeout                                                                        time.Duration
	createLease                                                                    time.Duration
	fenceExpiry                                                                    time.Duration
	printCSIDriver, showVersion, requireNodes, renewFences                         bool
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "rbd:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*config, error) {
	host, _ := os.Hostname()
	c := &config{}
	fs := flag.NewFlagSet("rbd", flag.ContinueOnError)
	fs.StringVar(&c.endpoint, "endpoint", "unix:///csi/csi.sock", "CSI endpoint")
	fs.StringVar(&c.monitors, "monitors", "", "comma-separated Ceph monitor addresses (required)")
	fs.StringVar(&c.pool, "pool", "rbd", "pool for StorageClasses that name none")
	fs.StringVar(&c.nodeID, "nodeid", host, "node ID")
	fs.StringVar(&c.zone, "zone", "", "this node's zone (topology "+driver.TopologyKey+"); empty: no topology")
	fs.StringVar(&c.stateDir, "state-dir", "/var/lib/csikit-rbd", "node working directory (root-only)")
	fs.StringVar(&c.nbdLockFile, "nbd-lock-file", driver.DefaultNBDLockFile, "host-wide lock under which rbd-nbd stages pick their /dev/nbdN: the same host path for every node plugin on the host")
	fs.StringVar(&c.mapper, "mapper", driver.MapperKRBD, "default mapper: krbd, rbd-nbd or rbd-fuse")
	fs.StringVar(&c.driverName, "driver-name", "rbd.csikit.dev", "CSI driver name")
	fs.IntVar(&c.cloneDepth, "max-clone-depth", 8, "flatten clones whose parent chain is longer (negative: always)")
	fs.DurationVar(&c.timeout, "ceph-timeout", 30*time.Second, "timeout of each Ceph operation")
	fs.DurationVar(&c.createLease, "create-lease", driver.DefaultCreateLease, "how long a create's journal reservation stays its own unrenewed (a running create renews it); the sweep of abandoned creates takes over only expired ones")
	fs.DurationVar(&c.fenceExpiry, "fence-expiry", driver.DefaultFenceExpiry, "how long the blocklist entries of a fence last unless Unfence lifts them (README: Node loss and fencing)")
	fs.StringVar(&c.secretsDir, "secrets-dir", "", "directory holding the files userID and userKey (a mounted Secret): standing Ceph credentials for the calls without secrets (Unfence and fence renewal after a restart, node registration)")
	fs.BoolVar(&c.requireNodes, "require-node-registration", false, "publish only to nodes whose node plugin registered (at NodeGetInfo, with --secrets-dir, in --pool); any other node ID is NOT_FOUND")
	fs.BoolVar(&c.renewFences, "renew-fences", true, "renew fences before their --fence-expiry while their nodes stay fenced (controllers; node plugins may turn it off)")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.metricsAddr, "metrics-address", "", "address for /metrics, /healthz and /readyz (empty = off)")
	fs.StringVar(&c.kubeletRegistration, "kubelet-registration-path", "", "register with kubelet directly (no node-driver-registrar): the CSI socket's path on the host, e.g. /var/lib/kubelet/plugins/rbd.csikit.dev/csi.sock")
	fs.StringVar(&c.kubeletRegistrationDir, "kubelet-registration-dir", registration.DefaultDir, "kubelet's plugin registration directory (for a kubelet with a non-default --root-dir)")
	fs.BoolVar(&c.printCSIDriver, "print-csidriver", false, "print the CSIDriver object as YAML and exit")
	fs.BoolVar(&c.showVersion, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.monitors == "" && !c.printCSIDriver && !c.showVersion {
		return nil, errors.New("--monitors is required")
	}
	return c, nil
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
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", cfg.logLevel)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	monitors := cfg.monitors
	if monitors == "" {
		monitors = "unused" // --print-csidriver touches no cluster
	}
	d, err := driver.New(driver.Options{
		Monitors: monitors, DefaultPool: cfg.pool, NodeID: cfg.nodeID, Zone: cfg.zone,
		StateDir: cfg.stateDir, NBDLockFile: cfg.nbdLockFile, Mapper: cfg.mapper, MaxCloneDepth: cfg.cloneDepth,
		OpTimeout: cfg.timeout, CreateLease: cfg.createLease, FenceExpiry: cfg.fenceExpiry, SecretsDir: cfg.secretsDir,
		RequireNodeRegistration: cfg.requireNodes, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer d.Close()
	opts := d.ServerOptions(csikit.Options{
		Name: cfg.driverName, Version: version(), NodeID: cfg.nodeID, Logger: logger,
	})
	var reg prometheus.Gatherer
	if cfg.metricsAddr != "" && !cfg.printCSIDriver {
		r := prometheus.NewRegistry()
		r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		opts.Registry, reg = r, r
	}
	srv, err := csikit.NewServer(d.Service(), opts)
	if err != nil {
		return err
	}
	if cfg.printCSIDriver {
		obj, err := srv.CSIDriver(csidriver.Options{LifecycleModes: []csidriver.LifecycleMode{csidriver.Persistent}})
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
	fmt.Fprintf(os.Stderr, "rbd %s: driver %s on node %s, serving %s, monitors %s\n", version(), cfg.driverName, cfg.nodeID, cfg.endpoint, cfg.monitors)
	var kubelet *registration.Options
	if cfg.kubeletRegistration != "" {
		kubelet = &registration.Options{DriverName: cfg.driverName, Endpoint: cfg.kubeletRegistration, Dir: cfg.kubeletRegistrationDir}
	}
	// The sweep releases, hourly, the journal reservations of creates that
	// failed a day or more ago and were never retried to success, in the
	// pools served since start, removing any image made under them, and the
	// hidden deleted images nothing needs any more. Every replica sweeps; a
	// reservation is claimed in RADOS first, and only once its lease
	// expired. (The first, at start, finds no pool served yet.)
	r, err := runner.NewDriver(runner.DriverOptions{
		Server: srv, Endpoint: cfg.endpoint, HTTPAddress: cfg.metricsAddr, Metrics: reg, Registration: kubelet,
		Sweep: func(ctx context.Context) error {
			var errs []error
			for _, k := range []journal.Kind{journal.KindVolume, journal.KindSnapshot} {
				_, err := d.SweepAbandoned(ctx, k, 24*time.Hour)
				errs = append(errs, err)
			}
			return errors.Join(errs...)
		},
		Logger: logger,
	})
	if err != nil {
		return err
	}
	// Fences outlive their --fence-expiry while their nodes stay fenced:
	// renewed in the background, stopped with the other parts.
	if cfg.renewFences {
		r.Add("fence-renewal", runner.Func(d.RenewFences))
	}
	return r.Run(context.Background()) // until SIGINT or SIGTERM
}

// version is the module version the binary was built from, or a
// development marker; never empty.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "v0.1.0-dev"
}

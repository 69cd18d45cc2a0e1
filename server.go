package csikit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/csi/endpoint"
	"github.com/csikit/csikit/csi/requestid"
	"github.com/csikit/csikit/csi/validation"
	"github.com/csikit/csikit/idempotency"
	"github.com/csikit/csikit/locks"
	"github.com/csikit/csikit/metrics"
	"github.com/csikit/csikit/topology"
)

// DefaultDrainTimeout bounds the graceful drain at shutdown when
// Options.DrainTimeout is zero.
const DefaultDrainTimeout = 30 * time.Second

// Server serves a driver over gRPC. Create it with NewServer; serve it once
// with ListenAndServe or Serve.
type Server struct {
	opts     Options
	driver   any
	disabled map[reflect.Type]bool // Options.Disable
	rpcs     map[string]*bound     // full method name → the table entry bound to driver
	caps     Capabilities
	served   map[string]bool // full method name → served (after alpha filtering)
	vcfg     validation.Config
	idem     *idempotency.Interceptor
	fence    *fencing // the driver's Fencer and its state; nil without one
	metrics  *metrics.ServerMetrics
	log      *slog.Logger
	// callLog is Options.Logger as given, for the logging interceptor:
	// its lines carry the request ID already (and the call's logger adds
	// it to the driver's), so they skip log's request-ID wrapper.
	callLog  *slog.Logger
	grpc     *grpc.Server
	unary    []grpc.UnaryServerInterceptor // csikit's chain and Options.UnaryInterceptors
	serveMu  sync.Mutex
	serveRan bool
}

// NewServer builds a Server for driver, which implements any of this
// package's driver interfaces (Provisioner, NodePublisher, …). It derives
// the capabilities the server advertises and the RPCs it serves from what
// driver implements and from opts, and returns an error when opts are
// invalid or the driver implements nothing.
func NewServer(driver any, opts Options) (*Server, error) {
	if driver == nil {
		return nil, errors.New("csikit: driver is nil")
	}
	if !validation.ValidPluginName(opts.Name) {
		return nil, fmt.Errorf("csikit: driver name %q is not a valid CSI plugin name: %s (e.g. block.vendor.example)", opts.Name, validation.PluginNameRule)
	}
	if opts.Version == "" {
		return nil, errors.New("csikit: Options.Version is required (CSI sidecars refuse an empty vendor_version)")
	}
	if opts.VolumeModes == 0 {
		opts.VolumeModes = Mount
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = DefaultDrainTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	_, node := driver.(NodePublisher)
	for _, t := range opts.Disable {
		if t == reflect.TypeFor[NodePublisher]() {
			node = false
		}
	}
	if _, info := driver.(NodeInfoer); node && !info && opts.NodeID == "" {
		return nil, errors.New("csikit: a node plugin needs Options.NodeID or a NodeGetInfo method (NodeInfoer)")
	}
	if len(opts.Topology) > 0 {
		if err := topology.Validate(&csi.Topology{Segments: opts.Topology}); err != nil {
			return nil, fmt.Errorf("csikit: Options.Topology: %s", status.Convert(err).Message())
		}
	}
	// Every line logged with a call's context carries its request ID,
	// also the driver's own lines when it logs through *Context methods.
	callHandler := opts.Logger.Handler()
	opts.Logger = slog.New(requestid.NewHandler(callHandler))
	s := &Server{opts: opts, driver: driver, log: opts.Logger, callLog: slog.New(callHandler)}
	if err := s.setDisabled(); err != nil {
		return nil, err
	}
	s.bindTable()
	if !s.servesService(csi.Controller_ServiceDesc.ServiceName) && !s.servesService(csi.Node_ServiceDesc.ServiceName) &&
		!s.servesService(csi.GroupController_ServiceDesc.ServiceName) && !s.servesService(csi.SnapshotMetadata_ServiceDesc.ServiceName) {
		return nil, fmt.Errorf("csikit: driver %T implements no CSI service (a node plugin implements NodePublisher; a controller plugin at least one controller interface such as Provisioner)", driver)
	}
	if s.servesService(csi.Controller_ServiceDesc.ServiceName) && !s.served[csi.Controller_ValidateVolumeCapabilities_FullMethodName] {
		return nil, fmt.Errorf("csikit: driver %T is a controller plugin but cannot answer ValidateVolumeCapabilities, which the CSI spec requires of every controller: implement csikit.VolumeLookup (LookupVolume(ctx, volumeID) error: NotFound for an unknown volume; csikit then confirms capabilities from Options) or csikit.CapabilityValidator", driver)
	}
	if ctrl := s.servesService(csi.Controller_ServiceDesc.ServiceName); ctrl && opts.ReadOnlyPublish && !s.served[csi.Controller_ControllerPublishVolume_FullMethodName] {
		return nil, fmt.Errorf("csikit: Options.ReadOnlyPublish advertises PUBLISH_READONLY, a ControllerPublishVolume capability, but driver %T does not serve ControllerPublishVolume (implement csikit.ControllerPublisher, or drop the option: a node enforces a readonly publish from the request's readonly field without it)", driver)
	} else if ctrl && opts.ListPublishedNodes && !s.served[csi.Controller_ListVolumes_FullMethodName] {
		return nil, fmt.Errorf("csikit: Options.ListPublishedNodes advertises LIST_VOLUMES_PUBLISHED_NODES, but driver %T does not serve ListVolumes (implement csikit.VolumeLister, or drop the option)", driver)
	}
	if err := s.setupFencing(); err != nil {
		return nil, err
	}
	s.caps = s.deriveCapabilities()
	s.vcfg = validationConfig(&opts, implements[Snapshotter](s), &s.caps)

	if err := s.buildChain(); err != nil {
		return nil, err
	}
	if s.fence != nil {
		s.registerFencing()
	}
	return s, nil
}

// validationConfig translates Options into the validator's terms.
func validationConfig(o *Options, snapshots bool, caps *Capabilities) validation.Config {
	var c validation.Config
	if o.VolumeModes&Mount != 0 {
		c.AccessTypes |= validation.Mount
	}
	if o.VolumeModes&Block != 0 {
		c.AccessTypes |= validation.Block
	}
	c.AccessModes = o.AccessModes
	if len(c.AccessModes) == 0 {
		c.AccessModes = []csi.VolumeCapability_AccessMode_Mode{
			csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
			csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
		}
		if o.SingleNodeMultiWriter && o.Alpha {
			c.AccessModes = append(c.AccessModes,
				csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
				csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER)
		}
	}
	c.ContentSources.Snapshot = snapshots
	c.ContentSources.Volume = caps.HasController(csi.ControllerServiceCapability_RPC_CLONE_VOLUME)
	c.StageUnstage = caps.HasNode(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME)
	return c
}

// Capabilities returns what the server advertises. The caller must not
// modify the returned messages.
func (s *Server) Capabilities() Capabilities { return s.caps }

// Serves reports whether the server serves the RPC with the given full
// method name (e.g. csi.Controller_CreateVolume_FullMethodName).
func (s *Server) Serves(fullMethod string) bool { return s.served[fullMethod] }

// GRPCServer returns the underlying gRPC server, for registering further
// services before serving.
func (s *Server) GRPCServer() *grpc.Server { return s.grpc }

// Locks returns the server's lock table, for a driver that locks more by
// hand or sweeps its journal (journal.Sweep) while serving.
func (s *Server) Locks() *locks.Table { return s.idem.Locks() }

// LockStats reports the per-volume locks held now and the age of the
// oldest, for health checks and metrics.
func (s *Server) LockStats() (held int, oldest time.Duration) {
	st := s.idem.Locks().Stats()
	return st.Held, st.Oldest
}

// ListenAndServe listens on endpoint (unix:///abs/path, an absolute path,
// or tcp://host:port) and serves until ctx ends. It then stops accepting
// calls, waits up to Options.DrainTimeout for in-flight calls to finish,
// cancels what remains, and removes the socket file. A stale socket left by
// a crashed process is replaced; a socket another live process serves is an
// error.
func (s *Server) ListenAndServe(ctx context.Context, ep string) error {
	lis, err := endpoint.Listen(ctx, ep, endpoint.Options{SocketMode: s.opts.SocketMode})
	if err != nil {
		return err
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "CSI driver listening",
		slog.String("driver", s.opts.Name), slog.String("version", s.opts.Version), slog.String("endpoint", ep))
	return s.Serve(ctx, lis)
}

// Serve serves on lis, which it closes, until ctx ends, then drains like
// ListenAndServe. It returns nil after a shutdown caused by ctx and the
// serving error otherwise. A Server serves once.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	s.serveMu.Lock()
	if s.serveRan {
		s.serveMu.Unlock()
		lis.Close()
		return errors.New("csikit: Server.Serve called twice")
	}
	s.serveRan = true
	s.serveMu.Unlock()

	errc := make(chan error, 1)
	go func() { errc <- s.grpc.Serve(lis) }()
	select {
	case err := <-errc:
		s.grpc.Stop()
		return err
	case <-ctx.Done():
	}
	s.shutdown()
	if err := <-errc; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// shutdown drains in-flight calls for at most DrainTimeout, then cancels.
func (s *Server) shutdown() {
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(s.opts.DrainTimeout)
	defer t.Stop()
	select {
	case <-done:
		s.log.Info("CSI driver stopped", slog.String("driver", s.opts.Name))
	case <-t.C:
		s.log.Warn("CSI driver drain timed out; cancelling in-flight calls",
			slog.String("driver", s.opts.Name), slog.Duration("drain_timeout", s.opts.DrainTimeout))
		s.grpc.Stop()
		<-done
	}
}

// Probe answers like the Identity service's Probe RPC, without a gRPC
// round trip: it calls the RPC table's Probe entry, so FailedPrecondition
// while Options.Journal reports itself unable to write
// (journal.HealthReporter), else the driver's Prober when it has one
// and Options.Disable does not list it, else ready. It skips the
// interceptors (no request log line, no call metrics). It lets a /healthz
// handler (runner.ProbeCheck) share the driver's readiness.
func (s *Server) Probe(ctx context.Context, req *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	resp, err := s.rpcs[csi.Identity_Probe_FullMethodName].unary(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*csi.ProbeResponse), nil
}

// JournalErr reports whether Options.Journal takes writes: nil while it
// does or when it reports nothing (journal.HealthReporter), else
// FailedPrecondition with the journal's reason, as Probe answers then.
// runner.NewDriver serves it as the "journal" health check.
func (s *Server) JournalErr() error { return journalHealthy(s) }

// driverInterfaces are the interfaces Options.Disable may name.
func driverInterfaces() map[reflect.Type]bool {
	m := map[reflect.Type]bool{reflect.TypeFor[VolumeLookup](): true, reflect.TypeFor[Fencer](): true}
	for i := range rpcs {
		if rpcs[i].iface != nil {
			m[rpcs[i].iface] = true
		}
	}
	return m
}

// setDisabled checks Options.Disable: each entry must be one of this
// package's driver interfaces.
func (s *Server) setDisabled() error {
	if len(s.opts.Disable) == 0 {
		return nil
	}
	known := driverInterfaces()
	s.disabled = make(map[reflect.Type]bool, len(s.opts.Disable))
	for _, t := range s.opts.Disable {
		if t == nil || !known[t] {
			return fmt.Errorf("csikit: Options.Disable: %v is not a csikit driver interface (want e.g. reflect.TypeFor[csikit.ControllerPublisher]())", t)
		}
		s.disabled[t] = true
	}
	return nil
}

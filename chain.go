package csikit

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	grpcrecovery "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/csikit/csikit/csi/logging"
	"github.com/csikit/csikit/csi/recovery"
	"github.com/csikit/csikit/csi/requestid"
	"github.com/csikit/csikit/csi/secrets"
	"github.com/csikit/csikit/idempotency"
	"github.com/csikit/csikit/journal"
	"github.com/csikit/csikit/metrics"
)

// buildChain creates the gRPC server with csikit's interceptors, in this
// order (outermost first), for unary and streaming calls alike — also for
// services registered through GRPCServer:
//
//  1. recovery, a safety net for csikit's own interceptors.
//  2. request ID: taken from incoming metadata or generated, in ctx.
//  3. logging: one line per call, secrets stripped, built only when logged;
//     the level from Options.LogLevel (DefaultLogLevel). It puts the call's
//     logger and start time in ctx (logging.FromContext; idempotency takes
//     the start as the locks' age). Each unary table entry has its own
//     (logging.Options.FullMethod): its method attribute is formatted once
//     by the handler, and DefaultLogLevel is resolved for it once; streams
//     and GRPCServer's services share one. Right below it,
//     secrets.UnaryServerInterceptor (and its stream variant) redacts the
//     request's secrets from a returned error's message and details, so
//     the log line and the client (and the Events sidecars make of it) see
//     the same text.
//  4. metrics (when Options.Registry is set): latency, codes, in-flight.
//  5. recovery: a panic in the driver (or below) becomes codes.Internal,
//     logged once with its stack and request ID, and counted; logging and
//     metrics above see it as the Internal error it became. The server
//     keeps serving.
//  6. admit: Unimplemented for every RPC the server does not serve, then
//     validation (InvalidArgument & co.) before the driver sees a request;
//     for streams, of every message received.
//  7. locks and journal (idempotency): Aborted while another call holds
//     the same volume, name or snapshot; names reserved before CreateVolume
//     and CreateSnapshot run. Locks are released on every return path,
//     panics included. Streams take locks only.
//  8. Options.UnaryInterceptors or Options.StreamInterceptors, then the
//     driver.
func (s *Server) buildChain() error {
	o := &s.opts
	var onPanic func(ctx context.Context, method string, p any)
	if o.Registry != nil {
		s.metrics = metrics.NewServerMetrics(metrics.ServerOptions{
			DriverName: o.Name,
			LockStats:  s.LockStats,
		})
		if err := o.Registry.Register(s.metrics); err != nil {
			return err
		}
		m := s.metrics
		onPanic = func(_ context.Context, method string, _ any) { m.PanicRecovered(method) }
		if h, ok := o.Journal.(journal.HealthReporter); ok {
			if err := o.Registry.Register(journalHealthGauge(o.Name, h)); err != nil {
				return err
			}
		}
		if s.fence != nil {
			if err := o.Registry.Register(s.fence.gauge(o.Name)); err != nil {
				return err
			}
		}
	}
	keys := LockKeys()
	maps.Copy(keys, o.LockKeys) // nil values: no locks (New drops them)
	idem, err := idempotency.New(idempotency.Options{
		Journal: o.Journal,
		NewID:   o.NewID,
		Keys:    keys,
		Logger:  s.log,
	})
	if err != nil {
		return err
	}
	s.idem = idem
	ropts := recovery.Options{Logger: s.log, OnPanic: onPanic}
	// The safety net around csikit's own interceptors is
	// go-grpc-middleware's recovery; the driver's panics are handled by the
	// inner one, which has the request at hand for redaction.
	safetyNet := grpcrecovery.WithRecoveryHandlerContext(recovery.RecoveryHandler(ropts))
	lopts := logging.Options{Level: o.LogLevel}
	if lopts.Level == nil {
		lopts.Level = s.defaultLogLevel
	}

	unary := []grpc.UnaryServerInterceptor{
		grpcrecovery.UnaryServerInterceptor(safetyNet),
		requestid.UnaryServerInterceptor(),
	}
	logAt := len(unary) // the logging interceptor's index, replaced per entry below
	unary = append(unary,
		logging.UnaryServerInterceptor(s.callLog, lopts),
		secrets.UnaryServerInterceptor(),
	)
	stream := []grpc.StreamServerInterceptor{
		grpcrecovery.StreamServerInterceptor(safetyNet),
		requestid.StreamServerInterceptor(),
		logging.StreamServerInterceptor(s.callLog, lopts),
		secrets.StreamServerInterceptor(),
	}
	if s.metrics != nil {
		unary = append(unary, s.metrics.UnaryServerInterceptor())
		stream = append(stream, s.metrics.StreamServerInterceptor())
	}
	unary = append(unary, recovery.UnaryServerInterceptor(ropts), s.admit, idem.UnaryServerInterceptor())
	unary = append(unary, o.UnaryInterceptors...)
	stream = append(stream, recovery.StreamServerInterceptor(ropts), s.admitStream, idem.StreamServerInterceptor())
	stream = append(stream, o.StreamInterceptors...)

	// The table's unary RPCs run a chain built once per RPC (no closure
	// per interceptor per call, as grpc.ChainUnaryInterceptor makes);
	// calls of services registered through GRPCServer run the same
	// interceptors through otherUnary.
	s.unary = unary
	for _, b := range s.rpcs {
		if b.unary == nil {
			continue
		}
		// The entry's own logging interceptor: its method attribute (and,
		// for DefaultLogLevel, its level) resolved once.
		eopts := logging.Options{Level: o.LogLevel, FullMethod: b.method}
		if eopts.Level == nil {
			eopts.Level = entryLogLevel(b.mutates)
		}
		ics := slices.Clone(unary)
		ics[logAt] = logging.UnaryServerInterceptor(s.callLog, eopts)
		b.chained = chainUnary(ics, &b.info, grpc.UnaryHandler(b.unary))
	}
	// Calls run on a pool of worker goroutines (more calls at once than
	// workers get a goroutine each, as without the pool): a worker's stack
	// has grown to what the chain needs, where a goroutine per call
	// started at 8 KiB and copied its stack as it grew — 5% of a Probe's
	// CPU in a driver process.
	sopts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(s.otherUnary), grpc.ChainStreamInterceptor(stream...),
		grpc.NumStreamWorkers(streamWorkers)}, o.ServerOptions...)
	s.grpc = grpc.NewServer(sopts...)
	s.register(s.grpc)
	return nil
}

// streamWorkers is the size of the server's pool of call goroutines
// (grpc.NumStreamWorkers; Options.ServerOptions may set another).
const streamWorkers = 16

// chainUnary returns h wrapped in ics (ics[0] outermost) for the calls of
// one method, whose info is fixed: the closures are made here, once.
func chainUnary(ics []grpc.UnaryServerInterceptor, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) grpc.UnaryHandler {
	for i := len(ics) - 1; i >= 0; i-- {
		ic, next := ics[i], h
		h = func(ctx context.Context, req any) (any, error) { return ic(ctx, req, info, next) }
	}
	return h
}

// otherUnary is the server's gRPC-level unary interceptor. Calls of the
// table's RPCs pass (their handler runs the prebuilt chain); calls of
// services registered through GRPCServer run csikit's interceptors here.
func (s *Server) otherUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if s.entryOf(info) != nil {
		return h(ctx, req)
	}
	return chainUnary(s.unary, info, h)(ctx, req)
}

// entryOf is the table entry of a unary call of s, which the table's
// calls carry in info.Server, or nil for a call of a service registered
// through GRPCServer (which cannot be a CSI service: s registers them
// all, and grpc-go refuses a second registration).
func (s *Server) entryOf(info *grpc.UnaryServerInfo) *bound {
	if b, ok := info.Server.(*bound); ok && b.srv == s {
		return b
	}
	return nil
}

// DefaultLogLevel is the level of a call's "call finished" line when
// Options.LogLevel is nil. A successful call logs at Info when its RPC
// changes state (CreateVolume, NodePublishVolume, …; the table's mutating
// entries) and at Debug otherwise: the RPCs COs poll (Probe,
// GetPluginInfo, Get*Capabilities, NodeGetInfo, NodeGetVolumeStats) and
// every other read, so a kubelet polling stats for hundreds of volumes does
// not flood an Info log. A failed call logs at
// logging.DefaultCodeToLevel's level for its code.
func DefaultLogLevel(fullMethod string, c codes.Code) slog.Level {
	mutates := false
	for i := range rpcs {
		mutates = mutates || (rpcs[i].method == fullMethod && rpcs[i].mutates)
	}
	return levelOf(mutates, c)
}

// levelOf is DefaultLogLevel's rule for a call of an entry that mutates or
// not.
func levelOf(mutates bool, c codes.Code) slog.Level {
	switch {
	case c != codes.OK:
		return logging.DefaultCodeToLevel(c)
	case mutates:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}

// entryLogLevel is DefaultLogLevel for the calls of one table entry.
func entryLogLevel(mutates bool) func(string, codes.Code) slog.Level {
	return func(_ string, c codes.Code) slog.Level { return levelOf(mutates, c) }
}

// defaultLogLevel is DefaultLogLevel with the server's table at hand.
func (s *Server) defaultLogLevel(fullMethod string, c codes.Code) slog.Level {
	b := s.rpcs[fullMethod]
	return levelOf(b != nil && b.mutates, c)
}

// journalHealthyName is the gauge that is 1 while Options.Journal takes
// writes and 0 while it reports itself unable to (a poisoned journal.File).
const journalHealthyName = "csikit_journal_healthy"

func journalHealthGauge(driver string, h journal.HealthReporter) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        journalHealthyName,
		Help:        "1 while the idempotency journal takes writes, 0 while a failed write keeps it from doing so (Probe then answers FAILED_PRECONDITION).",
		ConstLabels: prometheus.Labels{"driver_name": driver},
	}, func() float64 {
		if h.Err() != nil {
			return 0
		}
		return 1
	})
}

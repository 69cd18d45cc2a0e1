package csikit

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	grpcrecovery "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/csikit/csikit/csi/logging"
	"github.com/csikit/csikit/csi/recovery"
	"github.com/csikit/csikit/csi/requestid"
	"github.com/csikit/csikit/csi/secrets"
	"github.com/csikit/csikit/csi/validation"
	"github.com/csikit/csikit/idempotency"
	"github.com/csikit/csikit/metrics"
)

// buildChain creates the gRPC server with csikit's interceptors, in this
// order (outermost first):
//
//  1. recovery, a safety net for csikit's own interceptors.
//  2. request ID: taken from incoming metadata or generated, in ctx.
//  3. logging: one line per call, secrets stripped, built only when logged;
//     it puts the call's logger in ctx (logging.FromContext). Right below
//     it, secrets.UnaryServerInterceptor redacts the request's secrets
//     from a returned error's message and details, so the log line and
//     the client (and the Events sidecars make of it) see the same text.
//  4. metrics (when Options.Registry is set): latency, codes, in-flight.
//  5. recovery: a panic in the driver (or below) becomes codes.Internal,
//     logged once with its stack and request ID, and counted; logging and
//     metrics above see it as the Internal error it became. The server
//     keeps serving.
//  6. gate: Unimplemented for every RPC the server does not serve.
//  7. validation: InvalidArgument & co. before the driver sees a request.
//  8. locks and journal (idempotency): Aborted while another call holds
//     the same volume, name or snapshot; names reserved before CreateVolume
//     and CreateSnapshot run. Locks are released on every return path,
//     panics included.
//  9. Options.UnaryInterceptors, then the driver.
func (s *Server) buildChain() error {
	o := &s.opts
	var chain []grpc.UnaryServerInterceptor
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
		if h, ok := o.Journal.(idempotency.HealthReporter); ok {
			if err := o.Registry.Register(journalHealthGauge(o.Name, h)); err != nil {
				return err
			}
		}
	}
	ropts := recovery.Options{Logger: s.log, OnPanic: onPanic}
	chain = append(chain,
		// The safety net around csikit's own interceptors is
		// go-grpc-middleware's recovery; the driver's panics are handled
		// by the inner one, which has the request at hand for redaction.
		grpcrecovery.UnaryServerInterceptor(grpcrecovery.WithRecoveryHandlerContext(recovery.RecoveryHandler(ropts))),
		requestid.UnaryServerInterceptor(),
		logging.UnaryServerInterceptor(s.log, logging.Options{}),
		secrets.UnaryServerInterceptor(),
	)
	if s.metrics != nil {
		chain = append(chain, s.metrics.UnaryServerInterceptor())
	}
	chain = append(chain, recovery.UnaryServerInterceptor(ropts), s.gate, validation.UnaryServerInterceptor(s.vcfg))
	idem, err := idempotency.New(idempotency.Options{
		Journal: o.Journal,
		NewID:   o.NewID,
		Keys:    o.LockKeys,
		Logger:  s.log,
	})
	if err != nil {
		return err
	}
	s.idem = idem
	chain = append(chain, idem.UnaryServerInterceptor())
	chain = append(chain, o.UnaryInterceptors...)

	sopts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(chain...)}, o.ServerOptions...)
	s.grpc = grpc.NewServer(sopts...)
	csi.RegisterIdentityServer(s.grpc, identityService{s: s})
	csi.RegisterControllerServer(s.grpc, controllerService{s: s, d: s.d})
	csi.RegisterGroupControllerServer(s.grpc, groupService{s: s, d: s.d})
	csi.RegisterNodeServer(s.grpc, nodeService{s: s, d: s.d})
	return nil
}

// journalHealthyName is the gauge that is 1 while Options.Journal takes
// writes and 0 while it reports itself unable to (a poisoned FileJournal).
const journalHealthyName = "csikit_journal_healthy"

func journalHealthGauge(driver string, h idempotency.HealthReporter) prometheus.Collector {
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

// gate answers Unimplemented for every RPC the server does not serve,
// before validation, so a malformed call to a missing RPC still learns that
// the RPC is missing.
func (s *Server) gate(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if served, known := s.served[info.FullMethod]; known && !served {
		return nil, unimplemented(info.FullMethod, s.opts.Name)
	}
	return h(ctx, req)
}

// confirm answers ValidateVolumeCapabilities for drivers without their own.
func (s *Server) confirm(r *csi.ValidateVolumeCapabilitiesRequest) *csi.ValidateVolumeCapabilitiesResponse {
	return validation.Confirm(r, &s.vcfg)
}

package csikit

import (
	"context"

	grpcrecovery "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"

	"github.com/csikit/csikit/csi/logging"
	"github.com/csikit/csikit/csi/recovery"
	"github.com/csikit/csikit/csi/requestid"
	"github.com/csikit/csikit/idempotency"
	"github.com/csikit/csikit/metrics"
)

// buildChain creates the gRPC server with csikit's interceptors, in this
// order (outermost first):
//
//  1. recovery, a safety net for csikit's own interceptors.
//  2. request ID: taken from incoming metadata or generated, in ctx.
//  3. logging: one line per call, secrets stripped, built only when logged.
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
	}
	ropts := recovery.Options{Logger: s.log, OnPanic: onPanic}
	chain = append(chain,
		// The safety net around csikit's own interceptors is
		// go-grpc-middleware's recovery; the driver's panics are handled
		// by the inner one, which has the request at hand for redaction.
		grpcrecovery.UnaryServerInterceptor(grpcrecovery.WithRecoveryHandlerContext(recovery.RecoveryHandler(ropts))),
		requestid.UnaryServerInterceptor(),
		logging.UnaryServerInterceptor(s.log, logging.Options{}),
	)
	if s.metrics != nil {
		chain = append(chain, s.metrics.UnaryServerInterceptor())
	}
	chain = append(chain, recovery.UnaryServerInterceptor(ropts), s.admit)
	idem, err := idempotency.New(idempotency.Options{
		Journal:  o.Journal,
		NewID:    o.NewID,
		BaseKeys: lockKeys(),
		Keys:     o.LockKeys,
		Logger:   s.log,
	})
	if err != nil {
		return err
	}
	s.idem = idem
	chain = append(chain, idem.UnaryServerInterceptor())
	chain = append(chain, o.UnaryInterceptors...)

	sopts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(chain...)}, o.ServerOptions...)
	s.grpc = grpc.NewServer(sopts...)
	s.register(s.grpc)
	return nil
}

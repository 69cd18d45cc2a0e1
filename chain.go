package csikit

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csikit/csikit/csi/validation"
	"github.com/csikit/csikit/idempotency"
	"github.com/csikit/csikit/metrics"
)

// buildChain creates the gRPC server with csikit's interceptors, in this
// order (outermost first):
//
//  1. recovery: a panic becomes codes.Internal, logged once with its stack
//     and counted; the server keeps serving.
//  2. request ID: taken from incoming metadata or generated, in ctx.
//  3. logging: one line per call, secrets stripped, built only when logged.
//  4. metrics (when Options.Registry is set): latency, codes, in-flight.
//  5. gate: Unimplemented for every RPC the server does not serve.
//  6. validation: InvalidArgument & co. before the driver sees a request.
//  7. locks and journal (idempotency): Aborted while another call holds
//     the same volume, name or snapshot; names reserved before CreateVolume
//     and CreateSnapshot run.
//  8. Options.UnaryInterceptors, then the driver.
func (s *Server) buildChain() error {
	o := &s.opts
	var onPanic []func(ctx context.Context, method string, p any)
	var chain []grpc.UnaryServerInterceptor

	if o.Registry != nil {
		s.metrics = metrics.NewServerMetrics(metrics.ServerOptions{
			DriverName: o.Name,
			LockStats:  s.LockStats,
		})
		if err := o.Registry.Register(s.metrics); err != nil {
			return err
		}
		m := s.metrics
		onPanic = append(onPanic, func(_ context.Context, method string, _ any) { m.PanicRecovered(method) })
	}
	// TODO(integrator): recovery, request ID and logging land with csi/{recovery,requestid,logging}.
	_ = onPanic
	if s.metrics != nil {
		chain = append(chain, s.metrics.UnaryServerInterceptor())
	}
	chain = append(chain, s.gate, validation.UnaryServerInterceptor(s.vcfg))
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

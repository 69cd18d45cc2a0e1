package validation

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/csikit/csikit/internal/grpcstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Validate checks req, the request of the RPC fullMethod (a gRPC full method
// name such as csi.Controller_CreateVolume_FullMethodName), against the
// spec and cfg. It returns nil, or a status error whose code the spec names
// (InvalidArgument for malformed requests) and whose message names the
// field, e.g. "CreateVolume: name is required". Methods it does not know
// pass. A nil cfg means the zero Config.
func Validate(fullMethod string, req any, cfg *Config) error {
	m, ok := table[fullMethod]
	if !ok {
		return nil
	}
	return m.validate(req, cfg)
}

// A Rule checks the request of one RPC like [Validate] does for that RPC.
// A nil cfg means the zero Config.
type Rule func(req any, cfg *Config) error

// Lookup returns the Rule of the RPC fullMethod, without a table lookup per
// call; ok is false for methods the table does not know.
func Lookup(fullMethod string) (r Rule, ok bool) {
	m, ok := table[fullMethod]
	if !ok {
		return nil, false
	}
	return m.validate, true
}

func (m method) validate(req any, cfg *Config) error {
	if !m.is(req) {
		return status.Errorf(codes.Internal, "%s: validation got a request of type %T, not the method's request type", m.rpc, req)
	}
	if cfg == nil {
		cfg = &zeroConfig
	}
	for i := range m.rules {
		r := &m.rules[i]
		if p := r.check(req, cfg); p.failed() {
			return status.Error(p.code, p.message(m.rpc, r.field))
		}
	}
	return nil
}

// UnaryServerInterceptor returns an interceptor that runs [Validate] on every
// unary call and answers a malformed request with its error, without calling
// the handler. cfg is copied.
func UnaryServerInterceptor(cfg Config) grpc.UnaryServerInterceptor {
	cfg.AccessModes = append([]csi.VolumeCapability_AccessMode_Mode(nil), cfg.AccessModes...)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if err := Validate(info.FullMethod, req, &cfg); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor returns an interceptor that runs [Validate] on each
// message a streaming call receives (in CSI, the single request of the
// SnapshotMetadata RPCs); a malformed one fails the RecvMsg that read it, so
// the handler returns that error. cfg is copied.
func StreamServerInterceptor(cfg Config) grpc.StreamServerInterceptor {
	cfg.AccessModes = append([]csi.VolumeCapability_AccessMode_Mode(nil), cfg.AccessModes...)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if _, ok := table[info.FullMethod]; !ok {
			return handler(srv, ss)
		}
		method := info.FullMethod
		return handler(srv, &grpcstream.Stream{ServerStream: ss, OnRecv: func(m any) error { return Validate(method, m, &cfg) }})
	}
}

// Confirm answers ValidateVolumeCapabilities for a request that passed
// [Validate]: when cfg supports every requested capability the response
// confirms them; otherwise it has no confirmed field and a message naming
// the first unsupported one (an unsupported capability is not an error in
// this RPC). The driver still checks that the volume exists (NotFound
// otherwise) and may add the volume_context, parameters and
// mutable_parameters it has validated to the confirmation.
func Confirm(req *csi.ValidateVolumeCapabilitiesRequest, cfg *Config) *csi.ValidateVolumeCapabilitiesResponse {
	if cfg == nil {
		cfg = &zeroConfig
	}
	caps := req.GetVolumeCapabilities()
	if len(caps) == 0 {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: "no volume_capabilities to confirm"}
	}
	for i, c := range caps {
		if p := checkCapability(c, cfg, true); p.failed() {
			p = p.at(i)
			return &csi.ValidateVolumeCapabilitiesResponse{Message: p.message("ValidateVolumeCapabilities", "volume_capabilities")}
		}
	}
	return &csi.ValidateVolumeCapabilitiesResponse{
		Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{VolumeCapabilities: caps},
	}
}

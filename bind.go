package csikit

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csikit/csikit/csi/validation"
	"github.com/csikit/csikit/internal/grpcstream"
	"github.com/csikit/csikit/locks"
)

// bound is a table entry bound to one server's driver.
type bound struct {
	*rpc
	served bool
	unary  unaryCall  // unary RPCs: the call, or unimplemented
	stream streamCall // streaming RPCs: the call, or nil when not served
	// validate is the RPC's rule from csi/validation's spec-checked table.
	validate validation.Rule
	// info is handed to the interceptors of every call of this RPC, so a
	// call does not allocate one. Its Server is the bound entry.
	info grpc.UnaryServerInfo
	// chained is unary with csikit's interceptors and
	// Options.UnaryInterceptors around it, built once.
	chained grpc.UnaryHandler
	srv     *Server
}

// bindTable binds every entry of the table to s's driver and fills s.rpcs
// and s.served. Alpha RPCs are served only with Options.Alpha.
func (s *Server) bindTable() {
	alpha := alphaMethods()
	s.rpcs = make(map[string]*bound, len(rpcs))
	s.served = make(map[string]bool, len(rpcs))
	for i := range rpcs {
		e := &rpcs[i]
		b := &bound{rpc: e, srv: s, info: grpc.UnaryServerInfo{FullMethod: e.method}}
		b.info.Server = b
		b.validate, _ = validation.Lookup(e.method)
		ok := e.onlyIf == nil || e.onlyIf(s)
		if alpha[e.method] && !s.opts.Alpha {
			ok = false
		}
		if ok && e.bindUnary != nil {
			b.unary = e.bindUnary(s)
			b.served = b.unary != nil
		}
		if ok && e.bindStream != nil {
			b.stream = e.bindStream(s)
			b.served = b.stream != nil
		}
		s.rpcs[e.method] = b
	}
	// A service's Get*Capabilities is served when another RPC of the
	// service is.
	for _, b := range s.rpcs {
		if !b.ofService || (b.onlyIf != nil && !b.onlyIf(s)) {
			continue
		}
		other := false
		for _, o := range s.rpcs {
			if o != b && o.served && service(o.method) == service(b.method) {
				other = true
				break
			}
		}
		b.served = other
	}
	for m, b := range s.rpcs {
		if !b.served {
			method, driver := m, s.opts.Name
			b.unary = func(context.Context, any) (any, error) { return nil, unimplemented(method, driver) }
		}
		s.served[m] = b.served
	}
}

// servesService reports whether any RPC of the spec service (e.g.
// "csi.v1.Controller") is served.
func (s *Server) servesService(name string) bool {
	for m, b := range s.rpcs {
		if b.served && service(m) == name {
			return true
		}
	}
	return false
}

// LockKeys returns the lock keys of every RPC that takes locks, by gRPC
// full method name, as the RPC table says them (each entry's .locks). The
// map is a fresh copy. A Server uses them, amended by Options.LockKeys; a
// gRPC server of one's own passes them to idempotency.Options.Keys.
func LockKeys() map[string]locks.KeyFunc {
	out := make(map[string]locks.KeyFunc)
	for i := range rpcs {
		if rpcs[i].keys != nil {
			out[rpcs[i].method] = rpcs[i].keys
		}
	}
	return out
}

// register registers every spec service on g, each built from the table.
// Methods are registered whether served or not, so that a call to an RPC
// the server does not serve still runs through the chain (logged, counted)
// and gets csikit's Unimplemented.
func (s *Server) register(g *grpc.Server) {
	handlerTypes := map[string]any{
		csi.Identity_ServiceDesc.ServiceName:         csi.Identity_ServiceDesc.HandlerType,
		csi.Controller_ServiceDesc.ServiceName:       csi.Controller_ServiceDesc.HandlerType,
		csi.GroupController_ServiceDesc.ServiceName:  csi.GroupController_ServiceDesc.HandlerType,
		csi.SnapshotMetadata_ServiceDesc.ServiceName: csi.SnapshotMetadata_ServiceDesc.HandlerType,
		csi.Node_ServiceDesc.ServiceName:             csi.Node_ServiceDesc.HandlerType,
	}
	svcs := csi.File_csi_proto.Services()
	for i := 0; i < svcs.Len(); i++ {
		sd := svcs.Get(i)
		desc := grpc.ServiceDesc{
			ServiceName: string(sd.FullName()),
			HandlerType: handlerTypes[string(sd.FullName())],
			Metadata:    csi.File_csi_proto.Path(),
		}
		for j := 0; j < sd.Methods().Len(); j++ {
			md := sd.Methods().Get(j)
			b := s.rpcs[fullMethod(sd, md)]
			if b == nil {
				continue // unsupported: grpc-go answers Unimplemented
			}
			if md.IsStreamingServer() || md.IsStreamingClient() {
				desc.Streams = append(desc.Streams, grpc.StreamDesc{
					StreamName:    string(md.Name()),
					Handler:       b.handleStream,
					ServerStreams: md.IsStreamingServer(),
					ClientStreams: md.IsStreamingClient(),
				})
				continue
			}
			desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: string(md.Name()), Handler: b.handleUnary})
		}
		// A nil implementation skips grpc-go's HandlerType check: the
		// handlers above carry everything.
		g.RegisterService(&desc, nil)
	}
}

func fullMethod(sd protoreflect.ServiceDescriptor, md protoreflect.MethodDescriptor) string {
	return "/" + string(sd.FullName()) + "/" + string(md.Name())
}

// handleUnary is the grpc.MethodDesc handler of a unary entry.
func (b *bound) handleUnary(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
	req := b.newReq()
	if err := dec(req); err != nil {
		return nil, err
	}
	if ic == nil {
		return b.chained(ctx, req)
	}
	// ic is otherUnary (which passes) and any interceptors the driver
	// gave in Options.ServerOptions.
	return ic(ctx, req, &b.info, b.chained)
}

// handleStream is the grpc.StreamDesc handler of a server-streaming entry:
// it receives the request (validated and locked by the stream chain's
// RecvMsg wrappers) and hands it to the call.
func (b *bound) handleStream(_ any, ss grpc.ServerStream) error {
	if !b.served {
		return unimplemented(b.method, b.srv.opts.Name)
	}
	req := b.newReq()
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	return b.stream(req, ss)
}

// admit is the unary gate: Unimplemented for an RPC the server does not
// serve (before validation, so a malformed call to a missing RPC still
// learns that the RPC is missing), then the RPC's validation rule. Calls
// of services registered through GRPCServer pass untouched.
func (s *Server) admit(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	b := s.entryOf(info)
	if b == nil {
		return h(ctx, req)
	}
	if !b.served {
		return nil, unimplemented(info.FullMethod, s.opts.Name)
	}
	if b.validate != nil {
		if err := b.validate(req, &s.vcfg); err != nil {
			return nil, err
		}
	}
	return h(ctx, req)
}

// admitStream is admit for streaming calls: the gate before the handler
// runs, validation of each message the handler receives.
func (s *Server) admitStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	b := s.rpcs[info.FullMethod]
	if b == nil {
		return h(srv, ss)
	}
	if !b.served {
		return unimplemented(info.FullMethod, s.opts.Name)
	}
	if b.validate == nil {
		return h(srv, ss)
	}
	rule, cfg := b.validate, &s.vcfg
	return h(srv, &grpcstream.Stream{ServerStream: ss, OnRecv: func(m any) error { return rule(m, cfg) }})
}

// unimplemented is the gate's answer for an RPC the server does not serve.
func unimplemented(method, driver string) error {
	return status.Errorf(codes.Unimplemented, "%s is not implemented by CSI driver %s", method, driver)
}

package csikit

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// FencingService is the gRPC service a Server whose driver is a Fencer
// serves beside the CSI services on its endpoint, for admins (the csikit
// command's fences and unfence subcommands). Its messages are protobuf
// well-known types, so any gRPC client can call it:
//
//   - /csikit.v1.Fencing/List (google.protobuf.Empty) answers a
//     google.protobuf.Struct {"fenced": [{"volume_id", "node_id",
//     "since" (RFC 3339), "done" (bool)}], "complete": bool}: the
//     Server's FencedNodes, complete false when the journal cannot list
//     its records;
//   - /csikit.v1.Fencing/Unfence (google.protobuf.Struct {"volume_id",
//     "node_id"}) calls Server.Unfence and answers google.protobuf.Empty.
//
// Its calls run through the server's interceptors (request IDs, logs,
// metrics). Whoever can reach the endpoint can call it, as they can call
// ControllerPublishVolume: keep the socket the CO's alone.
const FencingService = "csikit.v1.Fencing"

// registerFencing registers FencingService on s's gRPC server.
func (s *Server) registerFencing() {
	handler := func(call func(ctx context.Context, req any) (any, error), newReq func() any, method string) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
		info := &grpc.UnaryServerInfo{Server: s, FullMethod: "/" + FencingService + "/" + method}
		return func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			req := newReq()
			if err := dec(req); err != nil {
				return nil, err
			}
			if ic == nil {
				return call(ctx, req)
			}
			return ic(ctx, req, info, call)
		}
	}
	s.grpc.RegisterService(&grpc.ServiceDesc{
		ServiceName: FencingService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "List", Handler: handler(s.listFencedCall, func() any { return new(emptypb.Empty) }, "List")},
			{MethodName: "Unfence", Handler: handler(s.unfenceCall, func() any { return new(structpb.Struct) }, "Unfence")},
		},
	}, nil)
}

func (s *Server) listFencedCall(ctx context.Context, _ any) (any, error) {
	fns, err := s.FencedNodes(ctx)
	complete := err == nil
	if err != nil && (status.Code(err) != codes.FailedPrecondition || s.fence == nil) {
		return nil, err
	}
	list := make([]any, 0, len(fns))
	for _, f := range fns {
		list = append(list, map[string]any{
			"volume_id": f.VolumeID, "node_id": f.NodeID,
			"since": f.Since.UTC().Format(time.RFC3339Nano), "done": f.Done,
		})
	}
	resp, err := structpb.NewStruct(map[string]any{"fenced": list, "complete": complete})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encoding the fenced nodes: %v", err)
	}
	return resp, nil
}

func (s *Server) unfenceCall(ctx context.Context, req any) (any, error) {
	f := req.(*structpb.Struct).GetFields()
	vol, node := f["volume_id"].GetStringValue(), f["node_id"].GetStringValue()
	if err := s.Unfence(ctx, vol, node); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

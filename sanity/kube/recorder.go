package kube

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Call is one CSI call a Recorder saw: the full method name, deep copies of
// the request and response (nil on error), and the error.
type Call struct {
	Method   string
	Request  proto.Message
	Response proto.Message
	Err      error
}

// Recorder records the CSI calls that reach a driver, so that a test can
// check what the sidecars sent. Add Interceptor to the driver server's
// interceptors (csikit.Options.UnaryInterceptors runs them just before the
// driver, after validation). Requests carry secrets: a Recorder keeps them
// in memory only and never logs them. The zero value is ready to use.
type Recorder struct {
	mu    sync.Mutex
	calls []Call
}

// Interceptor returns the recording interceptor.
func (r *Recorder) Interceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		c := Call{Method: info.FullMethod, Err: err}
		if m, ok := req.(proto.Message); ok {
			c.Request = proto.Clone(m)
		}
		if m, ok := resp.(proto.Message); ok && err == nil {
			c.Response = proto.Clone(m)
		}
		r.add(c)
		return resp, err
	}
}

func (r *Recorder) add(c Call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

// Calls returns the recorded calls of a full method name
// (csi.Controller_CreateVolume_FullMethodName, …), oldest first; all calls
// when method is empty.
func (r *Recorder) Calls(method string) []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Call
	for _, c := range r.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Code returns the gRPC code of a call's error (OK for success).
func (c Call) Code() string { return status.Code(c.Err).String() }

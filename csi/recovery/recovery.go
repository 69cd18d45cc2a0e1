package recovery

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/csikit/csikit/csi/requestid"
	"github.com/csikit/csikit/csi/secrets"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Options configures UnaryServerInterceptor. The zero value recovers
// silently.
type Options struct {
	// Logger receives one Error record per panic. Nil means no logging.
	Logger *slog.Logger
	// OnPanic, if set, is called once per panic with the call's context,
	// its full method name and the recovered value, e.g. to count panics.
	OnPanic func(ctx context.Context, method string, recovered any)
}

// UnaryServerInterceptor returns an interceptor that recovers a panic in the
// rest of the chain and answers codes.Internal instead.
func UnaryServerInterceptor(opts Options) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				resp, err = nil, handlePanic(ctx, opts, info.FullMethod, req, r)
			}
		}()
		return handler(ctx, req)
	}
}

// handlePanic logs r and returns the error the caller gets.
func handlePanic(ctx context.Context, opts Options, method string, req, r any) error {
	stack := debug.Stack()
	id, hasID := requestid.FromContext(ctx)
	if opts.Logger != nil {
		attrs := []slog.Attr{slog.String("method", method)}
		if hasID {
			attrs = append(attrs, slog.String(requestid.LogKey, id))
		}
		attrs = append(attrs, panicValue(r, req), slog.String("stack", string(stack)))
		opts.Logger.LogAttrs(ctx, slog.LevelError, "panic recovered", attrs...)
	}
	if opts.OnPanic != nil {
		callOnPanic(ctx, opts, method, r)
	}
	if hasID {
		return status.Errorf(codes.Internal, "internal error in %s (request %s); see the plugin's log", method, id)
	}
	return status.Errorf(codes.Internal, "internal error in %s; see the plugin's log", method)
}

// panicValue renders the recovered value without secrets.
func panicValue(r, req any) slog.Attr {
	if m, ok := r.(proto.Message); ok {
		return slog.Any("panic", secrets.LogValue(m))
	}
	text := fmt.Sprint(r)
	if m, ok := req.(proto.Message); ok {
		text = secrets.Redact(text, m)
	}
	return slog.String("panic", text)
}

func callOnPanic(ctx context.Context, opts Options, method string, r any) {
	defer func() {
		if r2 := recover(); r2 != nil && opts.Logger != nil {
			opts.Logger.LogAttrs(ctx, slog.LevelError, "panic in recovery.Options.OnPanic",
				slog.String("method", method), slog.String("stack", string(debug.Stack())))
		}
	}()
	opts.OnPanic(ctx, method, r)
}

// RecoveryHandler returns a handler for go-grpc-middleware's recovery
// interceptor (interceptors/recovery.WithRecoveryHandlerContext) that
// treats a panic as UnaryServerInterceptor does — one Error record with the
// stack, OnPanic, codes.Internal — for places where the request is not at
// hand, such as a safety net around other interceptors. Without the request
// it cannot redact the request's secrets out of the panic value, so the
// value itself is not logged, only its type.
func RecoveryHandler(opts Options) func(ctx context.Context, p any) error {
	return func(ctx context.Context, p any) error {
		method, _ := grpc.Method(ctx)
		return handlePanic(ctx, opts, method, nil, typeOnly{p})
	}
}

// typeOnly renders a panic value as its type only.
type typeOnly struct{ v any }

func (t typeOnly) String() string { return fmt.Sprintf("panic value of type %T (not logged)", t.v) }

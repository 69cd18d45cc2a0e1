package logging

import (
	"context"
	"log/slog"
	"time"

	"github.com/csikit/csikit/csi/requestid"
	"github.com/csikit/csikit/csi/secrets"
	"github.com/csikit/csikit/internal/logctx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Attribute keys and messages of the records the interceptor writes.
const (
	KeyMethod   = logctx.KeyMethod
	KeyCode     = "code"
	KeyDuration = "duration"
	KeyError    = "error"
	KeyRequest  = "request"
	KeyResponse = "response"

	MsgStarted  = "call started"
	MsgFinished = "call finished"
)

// UnaryServerInterceptor returns an interceptor that logs each call to
// logger and makes logger, with the call's request ID and method, the
// call's logger (FromContext); see the package documentation. A nil logger
// logs nothing and installs no logger.
func UnaryServerInterceptor(logger *slog.Logger, opts Options) grpc.UnaryServerInterceptor {
	return newCallLogger(logger, opts).intercept
}

func newCallLogger(logger *slog.Logger, opts Options) *callLogger {
	if logger == nil {
		return &callLogger{} // h nil: nothing is ever written
	}
	h := logger.Handler()
	l := &callLogger{h: h, level: opts.Level}
	if l.level == nil {
		levelFor := opts.CodeToLevel
		if levelFor == nil {
			levelFor = DefaultCodeToLevel
		}
		l.level = func(_ string, c codes.Code) slog.Level { return levelFor(c) }
		// The highest level any code maps to: below it, nothing is ever
		// written.
		l.maxLevel = slog.LevelDebug
		for c := codes.OK; c <= codes.Unauthenticated; c++ {
			l.maxLevel = max(l.maxLevel, levelFor(c))
		}
		l.bounded = true
	}
	if opts.FullMethod != "" {
		l.method = opts.FullMethod
		l.hm = h.WithAttrs([]slog.Attr{slog.String(KeyMethod, opts.FullMethod)})
	}
	return l
}

type callLogger struct {
	// h is the logger's handler; nil for a nil logger, whose calls are
	// neither logged nor given a logger in ctx.
	h     slog.Handler
	level func(method string, c codes.Code) slog.Level
	// bounded says maxLevel is the highest level a line can have.
	bounded  bool
	maxLevel slog.Level
	// method is Options.FullMethod and hm is h with its attribute added
	// once (WithAttrs), for the calls of that method.
	method string
	hm     slog.Handler
}

func (l *callLogger) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if l.h == nil {
		return handler(ctx, req) // a nil logger: nothing is ever written
	}
	// The call's start goes into its scope too: the lock table takes it
	// as the locks' age instead of reading the clock again.
	start := time.Now()
	ctx = logctx.NewContext(ctx, l.h, info.FullMethod, requestid.FromContext, start)
	if l.bounded && !l.h.Enabled(ctx, l.maxLevel) {
		return handler(ctx, req)
	}
	debug := l.h.Enabled(ctx, slog.LevelDebug)
	if debug {
		h, r := l.record(ctx, start, slog.LevelDebug, MsgStarted, info.FullMethod)
		r.AddAttrs(body(KeyRequest, req))
		h.Handle(ctx, r)
	}

	resp, err := handler(ctx, req)

	code := status.Code(err)
	level := l.level(info.FullMethod, code)
	if !l.h.Enabled(ctx, level) {
		return resp, err
	}
	now := time.Now()
	h, r := l.record(ctx, now, level, MsgFinished, info.FullMethod)
	r.AddAttrs(slog.String(KeyCode, code.String()), slog.Duration(KeyDuration, now.Sub(start)))
	if err != nil {
		msg := status.Convert(err).Message()
		if m, ok := req.(proto.Message); ok {
			msg = secrets.Redact(msg, m)
		}
		r.AddAttrs(slog.String(KeyError, msg))
	} else if debug {
		r.AddAttrs(body(KeyResponse, resp))
	}
	h.Handle(ctx, r)
	return resp, err
}

// record starts a record with the method and request ID and returns the
// handler to pass it to. The source location is left out: it would always
// point at this file. For Options.FullMethod's calls the method is the
// handler's (formatted once by WithAttrs), else the record's; either way
// it comes first.
func (l *callLogger) record(ctx context.Context, t time.Time, level slog.Level, msg, method string) (slog.Handler, slog.Record) {
	r := slog.NewRecord(t, level, msg, 0)
	h := l.hm
	if h == nil || method != l.method {
		h = l.h
		r.AddAttrs(slog.String(KeyMethod, method))
	}
	if id, ok := requestid.FromContext(ctx); ok {
		r.AddAttrs(slog.String(requestid.LogKey, id))
	}
	return h, r
}

// body is a stripped, lazily formatted request or response. A value that is
// not a proto message cannot be stripped, so only its absence is noted.
func body(key string, v any) slog.Attr {
	if m, ok := v.(proto.Message); ok {
		return slog.Any(key, secrets.LogValue(m))
	}
	if v == nil {
		return slog.Any(key, nil)
	}
	return slog.String(key, "(not a proto message; not logged)")
}

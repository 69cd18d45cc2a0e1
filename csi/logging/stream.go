package logging

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/csikit/csikit/csi/requestid"
	"github.com/csikit/csikit/internal/logctx"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csikit/csikit/csi/secrets"
)

// KeySent is the attribute of a streaming call's "call finished" line that
// counts the messages the server sent.
const KeySent = "sent"

// StreamServerInterceptor returns the stream variant of
// UnaryServerInterceptor: one "call finished" line per streaming call, with
// the number of messages sent; at Debug also a "call started" line with the
// first request received. Error messages are redacted against that
// request. A nil logger logs nothing.
func StreamServerInterceptor(logger *slog.Logger, opts Options) grpc.StreamServerInterceptor {
	return newCallLogger(logger, opts).interceptStream
}

func (l *callLogger) interceptStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if l.h == nil {
		return handler(srv, ss) // a nil logger: nothing is ever written
	}
	start := time.Now()
	ss = scopedStream{ServerStream: ss, ctx: logctx.NewContext(ss.Context(), l.h, info.FullMethod, requestid.FromContext, start)}
	ctx := ss.Context()
	if l.bounded && !l.h.Enabled(ctx, l.maxLevel) {
		return handler(srv, ss)
	}
	ls := &loggedStream{ServerStream: ss, l: l, method: info.FullMethod, debug: l.h.Enabled(ctx, slog.LevelDebug)}
	err := handler(srv, ls)

	code := status.Code(err)
	level := l.level(info.FullMethod, code)
	if !l.h.Enabled(ctx, level) {
		return err
	}
	now := time.Now()
	h, r := l.record(ctx, now, level, MsgFinished, info.FullMethod)
	r.AddAttrs(slog.String(KeyCode, code.String()), slog.Duration(KeyDuration, now.Sub(start)), slog.Int64(KeySent, ls.sent.Load()))
	if err != nil {
		msg := status.Convert(err).Message()
		if ls.first != nil {
			msg = secrets.Redact(msg, ls.first)
		}
		r.AddAttrs(slog.String(KeyError, msg))
	}
	h.Handle(ctx, r)
	return err
}

// loggedStream remembers the first request (for redaction and the Debug
// line) and counts what is sent. The handler's goroutine is the only one
// receiving. Sending may be done by another goroutine (csikit's
// SnapshotMetadata streams send from one of their own, which can still be
// blocked in SendMsg when the handler returns after a stalled client), so
// the count is atomic.
type loggedStream struct {
	grpc.ServerStream
	l      *callLogger
	method string
	debug  bool
	first  proto.Message
	sent   atomic.Int64
}

func (s *loggedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.first == nil {
		if pm, ok := m.(proto.Message); ok {
			s.first = pm
		}
		if s.debug {
			ctx := s.Context()
			h, r := s.l.record(ctx, time.Now(), slog.LevelDebug, MsgStarted, s.method)
			r.AddAttrs(body(KeyRequest, m))
			h.Handle(ctx, r)
		}
	}
	return nil
}

func (s *loggedStream) SendMsg(m any) error {
	if err := s.ServerStream.SendMsg(m); err != nil {
		return err
	}
	s.sent.Add(1)
	return nil
}

// scopedStream carries the call's logger in its context (FromContext).
type scopedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s scopedStream) Context() context.Context { return s.ctx }

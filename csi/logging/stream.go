package logging

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/csikit/csikit/csi/requestid"
	"github.com/csikit/csikit/internal/grpcstream"
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
	ctx := logctx.NewContext(ss.Context(), l.h, info.FullMethod, requestid.FromContext, start)
	if l.bounded && !l.h.Enabled(ctx, l.maxLevel) {
		return handler(srv, grpcstream.WithContext(ss, ctx))
	}
	ls := &streamLog{l: l, ctx: ctx, method: info.FullMethod, debug: l.h.Enabled(ctx, slog.LevelDebug)}
	err := handler(srv, &grpcstream.Stream{ServerStream: ss, Ctx: ctx, OnRecv: ls.recv, OnSend: ls.send})

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
		if first, ok := ls.first.Get().(proto.Message); ok {
			msg = secrets.Redact(msg, first)
		}
		r.AddAttrs(slog.String(KeyError, msg))
	}
	h.Handle(ctx, r)
	return err
}

// streamLog remembers the first request (for redaction and the Debug
// line) and counts what is sent. The handler's goroutine is the only one
// receiving. Sending may be done by another goroutine (csikit's
// SnapshotMetadata streams send from one of their own, which can still be
// blocked in SendMsg when the handler returns after a stalled client), so
// the count is atomic.
type streamLog struct {
	l      *callLogger
	ctx    context.Context
	method string
	debug  bool
	first  grpcstream.First
	sent   atomic.Int64
}

func (s *streamLog) recv(m any) error {
	if _, ok := m.(proto.Message); !ok || !s.first.Record(m) {
		return nil
	}
	if s.debug {
		h, r := s.l.record(s.ctx, time.Now(), slog.LevelDebug, MsgStarted, s.method)
		r.AddAttrs(body(KeyRequest, m))
		h.Handle(s.ctx, r)
	}
	return nil
}

func (s *streamLog) send(any) { s.sent.Add(1) }

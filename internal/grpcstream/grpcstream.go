// Package grpcstream is the one grpc.ServerStream wrapper csikit's stream
// interceptors share: a Stream gives the handler another context and calls
// hooks after each message received or sent, and First captures the first
// message a stream received. Each interceptor keeps only its own logic
// (validate a message, take its locks, count what is sent) in its hooks.
package grpcstream

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc"
)

// Stream wraps a grpc.ServerStream. Its zero hooks change nothing: with
// only Ctx set it is a stream with another context.
type Stream struct {
	grpc.ServerStream
	// Ctx, when not nil, is what Context returns instead of the wrapped
	// stream's context.
	Ctx context.Context
	// OnRecv, when set, is called once for every message RecvMsg received
	// without error, on the receiving goroutine; its error becomes
	// RecvMsg's (the handler then sees the message refused).
	OnRecv func(m any) error
	// OnSend, when set, is called once for every message SendMsg sent
	// without error. gRPC lets one goroutine send while another receives,
	// so OnSend may run concurrently with OnRecv.
	OnSend func(m any)
}

// Context returns Ctx, or the wrapped stream's context.
func (s *Stream) Context() context.Context {
	if s.Ctx != nil {
		return s.Ctx
	}
	return s.ServerStream.Context()
}

// RecvMsg receives from the wrapped stream, then calls OnRecv.
func (s *Stream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.OnRecv != nil {
		return s.OnRecv(m)
	}
	return nil
}

// SendMsg sends on the wrapped stream, then calls OnSend.
func (s *Stream) SendMsg(m any) error {
	if err := s.ServerStream.SendMsg(m); err != nil {
		return err
	}
	if s.OnSend != nil {
		s.OnSend(m)
	}
	return nil
}

// WithContext returns ss with ctx as its context.
func WithContext(ss grpc.ServerStream, ctx context.Context) grpc.ServerStream {
	return &Stream{ServerStream: ss, Ctx: ctx}
}

// First holds the first message a stream received. Record it from an
// OnRecv hook (or use CaptureFirst); Get may be called from any goroutine.
// The zero value holds nothing.
type First struct {
	p atomic.Pointer[message]
}

type message struct{ m any }

// Record keeps m if no message was recorded before, and reports whether
// it did.
func (f *First) Record(m any) bool {
	if f.p.Load() != nil {
		return false
	}
	return f.p.CompareAndSwap(nil, &message{m: m})
}

// Get returns the first message recorded, or nil.
func (f *First) Get() any {
	if p := f.p.Load(); p != nil {
		return p.m
	}
	return nil
}

// CaptureFirst returns ss wrapped so that the first message it receives
// is recorded in the returned First.
func CaptureFirst(ss grpc.ServerStream) (grpc.ServerStream, *First) {
	f := new(First)
	return &Stream{ServerStream: ss, OnRecv: func(m any) error { f.Record(m); return nil }}, f
}

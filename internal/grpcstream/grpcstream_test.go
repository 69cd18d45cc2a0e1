package grpcstream_test

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/internal/grpcstream"
)

// fakeStream receives the messages of recv in turn (an error ends it) and
// records what is sent; a send of "fail" fails.
type fakeStream struct {
	ctx  context.Context
	recv []any
	sent []any
}

func (f *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (f *fakeStream) SendHeader(metadata.MD) error { return nil }
func (f *fakeStream) SetTrailer(metadata.MD)       {}
func (f *fakeStream) Context() context.Context     { return f.ctx }
func (f *fakeStream) SendMsg(m any) error {
	if m == "fail" {
		return errors.New("send failed")
	}
	f.sent = append(f.sent, m)
	return nil
}
func (f *fakeStream) RecvMsg(m any) error {
	if len(f.recv) == 0 {
		return io.EOF
	}
	next := f.recv[0]
	f.recv = f.recv[1:]
	if err, ok := next.(error); ok {
		return err
	}
	*(m.(*string)) = next.(string)
	return nil
}

type ctxKey struct{}

// TestStreamHooks: each hook runs once per message that got through, not
// for a failed receive or send; OnRecv's error is RecvMsg's; Ctx replaces
// the context, and without it the wrapped stream's shows.
func TestStreamHooks(t *testing.T) {
	inner := &fakeStream{ctx: context.Background(), recv: []any{"a", errors.New("broken"), "b", "refused"}}
	var recvd, sent []any
	s := &grpcstream.Stream{
		ServerStream: inner,
		Ctx:          context.WithValue(context.Background(), ctxKey{}, "mine"),
		OnRecv: func(m any) error {
			recvd = append(recvd, *(m.(*string)))
			if *(m.(*string)) == "refused" {
				return status.Error(codes.InvalidArgument, "refused by the hook")
			}
			return nil
		},
		OnSend: func(m any) { sent = append(sent, m) },
	}
	if got := s.Context().Value(ctxKey{}); got != "mine" {
		t.Errorf("Context: got value %v, want the override's", got)
	}
	var m string
	for i, want := range []error{nil, errors.New("broken"), nil, status.Error(codes.InvalidArgument, "refused by the hook"), io.EOF} {
		err := s.RecvMsg(&m)
		if (err == nil) != (want == nil) || (err != nil && err.Error() != want.Error()) {
			t.Errorf("RecvMsg %d: got %v, want %v", i, err, want)
		}
	}
	if len(recvd) != 3 || recvd[0] != "a" || recvd[1] != "b" || recvd[2] != "refused" {
		t.Errorf("OnRecv saw %v, want [a b refused]", recvd)
	}
	for _, msg := range []any{"x", "fail", "y"} {
		_ = s.SendMsg(msg)
	}
	if len(sent) != 2 || sent[0] != "x" || sent[1] != "y" || len(inner.sent) != 2 {
		t.Errorf("OnSend saw %v (inner sent %v), want [x y]", sent, inner.sent)
	}

	plain := grpcstream.WithContext(inner, nil)
	if plain.Context() != inner.ctx {
		t.Error("WithContext(nil): want the wrapped stream's context")
	}
	if err := plain.SendMsg("z"); err != nil || inner.sent[len(inner.sent)-1] != "z" {
		t.Errorf("hookless SendMsg: %v, inner sent %v", err, inner.sent)
	}
}

// TestFirstRecord: only the first of many concurrent Records wins, and
// Get sees it from any goroutine.
func TestFirstRecord(t *testing.T) {
	var f grpcstream.First
	if f.Get() != nil {
		t.Fatal("zero First holds a message")
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if f.Record(i) {
				wins.Add(1)
			}
			_ = f.Get()
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || f.Get() == nil {
		t.Errorf("16 concurrent Records: %d won, Get %v; want exactly one", wins.Load(), f.Get())
	}
}

// metadataServer streams n responses, sent from several goroutines at once
// (csikit's SnapshotMetadata pump sends from a goroutine of its own).
type metadataServer struct {
	csi.UnimplementedSnapshotMetadataServer
	handlerCtx chan context.Context
}

func (s *metadataServer) GetMetadataAllocated(req *csi.GetMetadataAllocatedRequest, stream csi.SnapshotMetadata_GetMetadataAllocatedServer) error {
	s.handlerCtx <- stream.Context()
	var wg sync.WaitGroup
	var mu sync.Mutex // grpc-go allows one SendMsg at a time
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			errs <- stream.Send(&csi.GetMetadataAllocatedResponse{VolumeCapacityBytes: int64(i)})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestStreamOverGRPC serves a real server-streaming RPC on a unix socket
// through an interceptor built on Stream: the handler sees the overridden
// context, OnRecv runs once for the one request, OnSend once per response
// sent from concurrent goroutines, and First holds the request while the
// sends go on (run with -race).
func TestStreamOverGRPC(t *testing.T) {
	var recvs, sends atomic.Int32
	var first *grpcstream.First
	firstSeen := make(chan any, 1)
	interceptor := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		var captured grpc.ServerStream
		captured, first = grpcstream.CaptureFirst(ss)
		return h(srv, &grpcstream.Stream{
			ServerStream: captured,
			Ctx:          context.WithValue(ss.Context(), ctxKey{}, "scoped"),
			OnRecv:       func(any) error { recvs.Add(1); return nil },
			OnSend: func(any) {
				sends.Add(1)
				select {
				case firstSeen <- first.Get():
				default:
				}
			},
		})
	}
	srv := grpc.NewServer(grpc.StreamInterceptor(interceptor))
	impl := &metadataServer{handlerCtx: make(chan context.Context, 1)}
	csi.RegisterSnapshotMetadataServer(srv, impl)
	sock := filepath.Join(t.TempDir(), "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	stream, err := csi.NewSnapshotMetadataClient(conn).GetMetadataAllocated(context.Background(), &csi.GetMetadataAllocatedRequest{SnapshotId: "snap-1"})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		_, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got++
	}
	if got != 8 || sends.Load() != 8 || recvs.Load() != 1 {
		t.Errorf("client got %d, OnSend ran %d times, OnRecv %d; want 8, 8, 1", got, sends.Load(), recvs.Load())
	}
	if v := (<-impl.handlerCtx).Value(ctxKey{}); v != "scoped" {
		t.Errorf("handler's context: got value %v, want the override's", v)
	}
	req, _ := (<-firstSeen).(*csi.GetMetadataAllocatedRequest)
	if req.GetSnapshotId() != "snap-1" {
		t.Errorf("first message seen while sending: got %v, want the request", req)
	}
}

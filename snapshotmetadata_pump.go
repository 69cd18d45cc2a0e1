package csikit

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// metadataPump sends a SnapshotMetadata call's messages from a goroutine of
// its own, so that a batch goes out while the driver is still producing the
// next. The hand-over is unbuffered: while one message is being sent the
// driver fills at most one more batch, then waits (back-pressure at the
// client's pace, gRPC flow control). The sent batch comes back through free
// for reuse, so a long stream allocates two batches, not one per message.
//
// A send that does not complete within timeout (the client stopped reading)
// ends the call: ctx is cancelled with a DeadlineExceeded status as its
// cause, the handler returns it at once — releasing the snapshots' locks —
// and the goroutine still blocked in SendMsg returns when gRPC closes the
// stream behind the handler.
type metadataPump struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	ss      grpc.ServerStream
	msg     func(t csi.BlockMetadataType, capacity int64, batch []*csi.BlockMetadata) any
	timeout time.Duration
	timer   *time.Timer

	work    chan pumpItem
	free    chan []*csi.BlockMetadata
	done    chan struct{} // closed when the goroutine returns
	err     error         // the failed send's error; read after done
	stalled chan struct{} // closed when a send overran timeout
	expired error         // the DeadlineExceeded status of a stall
}

type pumpItem struct {
	typ      csi.BlockMetadataType
	capacity int64
	batch    []*csi.BlockMetadata
}

func startPump(parent context.Context, ss grpc.ServerStream, timeout time.Duration,
	msg func(csi.BlockMetadataType, int64, []*csi.BlockMetadata) any) *metadataPump {
	ctx, cancel := context.WithCancelCause(parent)
	p := &metadataPump{
		ctx: ctx, cancel: cancel, ss: ss, msg: msg, timeout: timeout,
		work: make(chan pumpItem), free: make(chan []*csi.BlockMetadata, 1),
		done: make(chan struct{}), stalled: make(chan struct{}),
		expired: status.Errorf(codes.DeadlineExceeded,
			"the client accepted no SnapshotMetadata message for %v (it stopped reading): the stream is ended and the snapshot released; read the stream while it runs, or raise csikit.Options.MetadataSendTimeout", timeout),
	}
	p.timer = time.AfterFunc(timeout, p.expire)
	p.timer.Stop()
	go p.run()
	return p
}

func (p *metadataPump) expire() {
	p.cancel(p.expired)
	close(p.stalled)
}

func (p *metadataPump) run() {
	defer close(p.done)
	for it := range p.work {
		p.timer.Reset(p.timeout)
		err := p.ss.SendMsg(p.msg(it.typ, it.capacity, it.batch))
		if !p.timer.Stop() {
			return // expired: the handler has returned or is returning
		}
		if err != nil {
			p.err = err
			p.cancel(err)
			return
		}
		// SendMsg has encoded the message: the batch may be refilled.
		select {
		case p.free <- it.batch[:0]:
		default:
		}
	}
}

// send hands a batch to the goroutine, waiting while it sends the previous
// one. It is the BlockMetadataStream's send function.
func (p *metadataPump) send(t csi.BlockMetadataType, capacity int64, batch []*csi.BlockMetadata) error {
	select {
	case p.work <- pumpItem{t, capacity, batch}:
		return nil
	case <-p.ctx.Done():
		return contextError(p.ctx)
	}
}

// stop waits for the messages handed over to be sent and returns the
// call's result: DeadlineExceeded after a stall, else the driver's error,
// else the error of a failed send.
func (p *metadataPump) stop(err error) error {
	close(p.work)
	defer p.cancel(nil)
	select {
	case <-p.done:
	case <-p.stalled:
	}
	select {
	case <-p.stalled:
		return p.expired
	default:
	}
	if err != nil {
		return err
	}
	return p.err
}

// contextError is the status for a cancelled ctx: its cause when that is a
// status (a stalled client, a failed send), else the context's own code.
func contextError(ctx context.Context) error {
	cause := context.Cause(ctx)
	if _, ok := status.FromError(cause); ok && cause != nil {
		return cause
	}
	return status.FromContextError(ctx.Err()).Err()
}

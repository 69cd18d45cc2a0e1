package journal

import (
	"context"
	"errors"
	"sync"

	"github.com/csikit/csikit/internal/kvlog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// callWritesKey carries a *callWrites in the context of a call that the
// Interceptor journals (the create and delete calls).
type callWritesKey struct{}

// callWrites collects the KV writes a driver deferred (KV.DeferPut,
// KV.DeferDelete) during one journaled call, in call order.
type callWrites struct {
	// req is the call's request, for Request.
	req  any
	mu   sync.Mutex
	ops  []deferredOp
	size int // opSize of ops, at most MaxDeferred
}

type deferredOp struct {
	j      *File
	bucket string
	key    string
	value  []byte
	del    bool
}

// size bounds the op's encoded size in the journal file: an op byte, three
// length prefixes, bucket, key and value.
func (op deferredOp) size() int { return 16 + len(op.bucket) + len(op.key) + len(op.value) }

// kvName names the op's KV space, for errors.
func (op deferredOp) kvName() string { return (&KV{bucket: op.bucket}).String() }

// A Call is one create or delete call that an interceptor journals: it
// carries the call's request (for Request) and collects the KV writes the
// driver defers (KV.DeferPut, KV.DeferDelete), which the File's Commit or
// Release takes into its own transaction. Start one with WithCall before
// calling the driver and the journal, and Flush it before answering.
type Call struct{ cw *callWrites }

// WithCall returns ctx carrying a new Call for req. The idempotency
// interceptor starts one for every create and delete call it journals.
func WithCall(ctx context.Context, req any) (context.Context, *Call) {
	cw := &callWrites{req: req}
	return context.WithValue(ctx, callWritesKey{}, cw), &Call{cw: cw}
}

// Flush makes durable the deferred writes no Commit or Release took (the
// driver failed, the journal wrote nothing, or the commit was refused), one
// transaction per File. The call's answer must not go out before it
// returns; an error means the driver's metadata is not recorded.
func (c *Call) Flush() error { return c.cw.flush() }

// Request returns the request of the create or delete call that the
// Journal method running in ctx serves. Interceptor gives every Journal
// method it calls a context that carries the request, so a journal that
// depends on the request, such as one kept in the storage pool a
// CreateVolume's parameters name and opened with the credentials in its
// secrets, needs nothing beyond the Journal interface. The driver's
// handler sees it too. Journal calls made outside a request, by Sweep or
// a driver's own start-up, have none.
func Request(ctx context.Context) (any, bool) {
	if cw := callWritesFrom(ctx); cw != nil && cw.req != nil {
		return cw.req, true
	}
	req := ctx.Value(requestKey{})
	return req, req != nil
}

type requestKey struct{}

// ContextWithRequest returns ctx carrying req as Request; for testing a
// Journal without the interceptor.
func ContextWithRequest(ctx context.Context, req any) context.Context {
	return context.WithValue(ctx, requestKey{}, req)
}

func callWritesFrom(ctx context.Context) *callWrites {
	cw, _ := ctx.Value(callWritesKey{}).(*callWrites)
	return cw
}

// add defers op, unless the call's deferred writes would then exceed
// MaxDeferred.
func (cw *callWrites) add(op deferredOp) error {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	n := op.size()
	if cw.size+n > MaxDeferred {
		return status.Errorf(codes.ResourceExhausted,
			"journal: %s: deferring %q would take this call's deferred writes to %d bytes, at most %d; write some with Put",
			op.kvName(), op.key, cw.size+n, MaxDeferred)
	}
	cw.size += n
	cw.ops = append(cw.ops, op)
	return nil
}

// last returns the latest write deferred for bucket/key of j, if any. A
// nil receiver has none.
func (cw *callWrites) last(j *File, bucket, key string) (deferredOp, bool) {
	if cw == nil {
		return deferredOp{}, false
	}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	for i := len(cw.ops) - 1; i >= 0; i-- {
		if op := cw.ops[i]; op.j == j && op.bucket == bucket && op.key == key {
			return op, true
		}
	}
	return deferredOp{}, false
}

// take removes and returns the deferred writes for j, in order. A nil
// receiver has none.
func (cw *callWrites) take(j *File) []deferredOp {
	if cw == nil {
		return nil
	}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	var mine, rest []deferredOp
	for _, op := range cw.ops {
		if op.j == j {
			mine = append(mine, op)
		} else {
			rest = append(rest, op)
		}
	}
	cw.ops = rest
	for _, op := range mine {
		cw.size -= op.size()
	}
	return mine
}

// putBack returns writes that could not be made durable, ahead of any
// deferred since.
func (cw *callWrites) putBack(ops []deferredOp) {
	if cw == nil || len(ops) == 0 {
		return
	}
	cw.mu.Lock()
	cw.ops = append(ops, cw.ops...)
	for _, op := range ops {
		cw.size += op.size()
	}
	cw.mu.Unlock()
}

// flush makes every remaining deferred write durable, one transaction per
// journal.
func (cw *callWrites) flush() error {
	var errs []error
	for {
		cw.mu.Lock()
		if len(cw.ops) == 0 {
			cw.mu.Unlock()
			return errors.Join(errs...)
		}
		j := cw.ops[0].j
		cw.mu.Unlock()
		ops := cw.take(j)
		if err := j.db.Update(func(tx *kvlog.Tx) error { applyOps(tx, ops); return nil }); err != nil {
			errs = append(errs, storageErr("deferred KV write", err))
		}
	}
}

func applyOps(tx *kvlog.Tx, ops []deferredOp) {
	for _, op := range ops {
		if op.del {
			tx.Delete(op.bucket, op.key)
		} else {
			tx.Put(op.bucket, op.key, op.value)
		}
	}
}

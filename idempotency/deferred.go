package idempotency

import (
	"context"
	"errors"
	"sync"

	"github.com/csikit/csikit/internal/kvlog"
)

// callWritesKey carries a *callWrites in the context of a call that the
// Interceptor journals (the create and delete calls).
type callWritesKey struct{}

// callWrites collects the KV writes a driver deferred (KV.DeferPut,
// KV.DeferDelete) during one journaled call, in call order.
type callWrites struct {
	mu  sync.Mutex
	ops []deferredOp
}

type deferredOp struct {
	j      *FileJournal
	bucket string
	key    string
	value  []byte
	del    bool
}

func withCallWrites(ctx context.Context) (context.Context, *callWrites) {
	cw := &callWrites{}
	return context.WithValue(ctx, callWritesKey{}, cw), cw
}

func callWritesFrom(ctx context.Context) *callWrites {
	cw, _ := ctx.Value(callWritesKey{}).(*callWrites)
	return cw
}

func (cw *callWrites) add(op deferredOp) {
	cw.mu.Lock()
	cw.ops = append(cw.ops, op)
	cw.mu.Unlock()
}

// take removes and returns the deferred writes for j, in order. A nil
// receiver has none.
func (cw *callWrites) take(j *FileJournal) []deferredOp {
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

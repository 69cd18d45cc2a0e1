package idempotency

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// maxBatch bounds how many writes share one transaction.
const maxBatch = 256

// groupCommit runs write functions in as few bbolt transactions (and so
// fsyncs) as possible. A caller that finds no commit in progress becomes
// the leader and commits at once, so a lone caller pays one fsync and no
// timer; callers that arrive meanwhile queue up, and the next leader
// commits them all in one transaction. Unlike bbolt's DB.Batch there is no
// delay to wait out.
//
// Write functions must be idempotent (they may run twice: if one fails, the
// batch is rolled back and each function re-runs in its own transaction)
// and should report logical outcomes through captured variables, returning
// errors only for storage failures.
type groupCommit struct {
	db    *bolt.DB
	mu    sync.Mutex
	queue []*writeOp
	busy  bool
}

type writeOp struct {
	fn   func(*bolt.Tx) error
	done chan writeResult
}

type writeResult struct {
	err  error
	lead bool // not a result: the receiver is now the leader
}

func (g *groupCommit) do(fn func(*bolt.Tx) error) error {
	op := &writeOp{fn: fn, done: make(chan writeResult, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, op)
	if g.busy {
		g.mu.Unlock()
		r := <-op.done
		if !r.lead {
			return r.err
		}
		g.mu.Lock()
	} else {
		g.busy = true
	}
	// Leader, holding g.mu: commit what is queued (op included).
	batch := g.queue
	if len(batch) > maxBatch {
		batch = batch[:maxBatch:maxBatch]
		g.queue = append([]*writeOp(nil), g.queue[maxBatch:]...)
	} else {
		g.queue = nil
	}
	g.mu.Unlock()

	g.commit(batch)

	g.mu.Lock()
	if len(g.queue) > 0 {
		next := g.queue[0]
		g.mu.Unlock()
		next.done <- writeResult{lead: true}
	} else {
		g.busy = false
		g.mu.Unlock()
	}
	return (<-op.done).err
}

func (g *groupCommit) commit(batch []*writeOp) {
	err := g.db.Update(func(tx *bolt.Tx) error {
		for _, op := range batch {
			if err := op.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || len(batch) == 1 {
		for _, op := range batch {
			op.done <- writeResult{err: err}
		}
		return
	}
	// Someone failed: isolate it by running each alone.
	for _, op := range batch {
		op.done <- writeResult{err: g.db.Update(op.fn)}
	}
}

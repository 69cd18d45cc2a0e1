package journal

import (
	"bytes"
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/internal/kvlog"
)

// Size limits of a File's KV spaces. A write over them fails at
// the call that makes it (Put, Delete, DeferPut, DeferDelete) with the
// code named, and the journal is unaffected. The journal file as a whole
// has no size limit but memory for its keys (values are read from the
// file) and is compacted in pieces.
const (
	// MaxKVValue bounds one value (InvalidArgument).
	MaxKVValue = 16 << 20
	// MaxDeferred bounds the keys and values one call may defer
	// (DeferPut, DeferDelete), taken together: they are written in one
	// transaction with the journal's record of the call
	// (ResourceExhausted; write some with Put instead).
	MaxDeferred = 32 << 20
)

// KV is a durable key-value space inside a File's file, for a
// single-node driver's own metadata (volume sizes, attachments, …). Its
// writes join the journal's group commit: a driver whose CreateVolume
// reserves a name, writes its metadata and commits shares flushes with
// every concurrent call instead of paying for a second file. Keys are
// opaque; values are the caller's bytes. Safe for concurrent use.
type KV struct {
	j      *File
	bucket string
}

// KV returns the key-value space called name (1–64 bytes). Spaces are
// separate from each other and from the journal's own records; a space
// that was never written is empty.
func (j *File) KV(name string) (*KV, error) {
	if name == "" || len(name) > 64 {
		return nil, status.Errorf(codes.InvalidArgument, "journal: KV name %q: want 1-64 bytes", name)
	}
	return &KV{j: j, bucket: "kv/" + name}, nil
}

// Put stores value under key durably (flushed, grouped with concurrent
// writers) before it returns. Writes this call deferred to the same file
// (DeferPut, DeferDelete) are made durable first, in the same transaction,
// so writes to one key always land in call order.
func (kv *KV) Put(ctx context.Context, key string, value []byte) error {
	return kv.write(ctx, deferredOp{j: kv.j, bucket: kv.bucket, key: key, value: value}, false)
}

// Delete removes key durably; a missing key is not an error. Deferred
// writes go first, as for Put.
func (kv *KV) Delete(ctx context.Context, key string) error {
	return kv.write(ctx, deferredOp{j: kv.j, bucket: kv.bucket, key: key, del: true}, false)
}

// DeferPut stores value under key as part of the journal write that ends
// the current call, when ctx is that of a call the Interceptor journals
// with this file (CreateVolume, CreateSnapshot and
// CreateVolumeGroupSnapshot commit; the Delete calls release): the driver's
// metadata and the journal's record land in one atomic transaction, and
// the call pays one flush instead of two. The write is durable before the
// call's response is sent — whether the driver succeeded or failed, and
// also if the journal writes nothing at the end (the write is then made on
// its own). Until then it is not durable: a driver that must know its
// metadata is on disk before its next step uses Put. If that final write
// fails the call fails with Unavailable and the CO retries it. Outside such
// a call DeferPut is Put.
//
// Get with the same call's ctx sees the deferred write at once (the call
// reads its own writes); other calls, and ForEach, see it once it is
// durable.
func (kv *KV) DeferPut(ctx context.Context, key string, value []byte) error {
	return kv.write(ctx, deferredOp{j: kv.j, bucket: kv.bucket, key: key, value: value}, true)
}

// DeferDelete removes key as part of the journal write that ends the
// current call, as DeferPut stores.
func (kv *KV) DeferDelete(ctx context.Context, key string) error {
	return kv.write(ctx, deferredOp{j: kv.j, bucket: kv.bucket, key: key, del: true}, true)
}

func (kv *KV) write(ctx context.Context, op deferredOp, deferred bool) error {
	if err := checkKey(op.key); err != nil {
		return err
	}
	if len(op.value) > MaxKVValue {
		return status.Errorf(codes.InvalidArgument, "journal: %s: value of %d bytes for key %q: at most %d", kv, len(op.value), op.key, MaxKVValue)
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	cw := callWritesFrom(ctx)
	if deferred && cw != nil {
		if !op.del {
			op.value = bytes.Clone(op.value)
		}
		return cw.add(op)
	}
	ops := append(cw.take(kv.j), op)
	err := kv.j.db.Update(func(tx *kvlog.Tx) error { applyOps(tx, ops); return nil })
	if err != nil {
		cw.putBack(ops[:len(ops)-1])
	}
	return storageErr("KV write", err)
}

// Get returns a copy of the value stored under key, and whether there is
// one. Within a call that deferred writes to key (DeferPut, DeferDelete),
// with that call's ctx, it returns the last of them: a call reads its own
// writes before they are durable. Otherwise it returns the durable value,
// read from the file (the page cache, as a rule).
func (kv *KV) Get(ctx context.Context, key string) (value []byte, ok bool, err error) {
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, status.FromContextError(err).Err()
	}
	if op, found := callWritesFrom(ctx).last(kv.j, kv.bucket, key); found {
		if op.del {
			return nil, false, nil
		}
		return bytes.Clone(op.value), true, nil
	}
	err = kv.j.db.View(func(r kvlog.Reader) error {
		v := r.Get(kv.bucket, key)
		value, ok = bytes.Clone(v), v != nil
		return nil
	})
	return value, ok, err
}

// Has reports whether a durable value is stored under key (not a call's
// deferred writes). It looks only at the index in memory: no read of the
// file, so it is the cheap test of a key's existence, say for every
// object a driver finds at its start.
func (kv *KV) Has(key string) bool {
	var ok bool
	_ = kv.j.db.View(func(r kvlog.Reader) error {
		ok = r.Has(kv.bucket, key)
		return nil
	})
	return ok
}

// ForEach calls fn for every key in key order, on one consistent view of
// the durable values (not a call's deferred writes); value is valid only
// during the call and must not be modified. Keys are held in memory,
// values are read from the file (from the page cache, as a rule) as the
// walk reaches them. An error from fn stops the
// walk and is returned. fn must not call the journal or its KV spaces
// (writes wait until ForEach returns).
func (kv *KV) ForEach(fn func(key string, value []byte) error) error {
	return kv.j.db.View(func(r kvlog.Reader) error { return r.ForEach(kv.bucket, fn) })
}

// Scan calls fn for every key, as ForEach does, but in no particular
// order: it reads the values in the order they are in the file, a few
// reads of a megabyte rather than one per key, so it is the fast way to
// visit a whole large space (at a driver's start, say).
func (kv *KV) Scan(fn func(key string, value []byte) error) error {
	return kv.j.db.View(func(r kvlog.Reader) error { return r.Scan(kv.bucket, fn) })
}

// ForEachAfter is ForEach over the keys after after ("" for all): a page
// of a long listing costs the keys it visits, not the whole space.
func (kv *KV) ForEachAfter(after string, fn func(key string, value []byte) error) error {
	from := after
	if after != "" {
		from = after + "\x00" // the first key after it
	}
	return kv.j.db.View(func(r kvlog.Reader) error { return r.ForEachFrom(kv.bucket, from, fn) })
}

// Watch keeps a derived figure (a running total, a count) in step with
// the space without walking it: it calls fn(key, nil, value) for every key
// now, then fn(key, old, new) for every durable change, in commit order
// (old is nil for a new key, new nil for a delete). A call's deferred
// writes are seen when they are durable, never before. fn runs with the
// journal locked — what it has seen always matches what Get and ForEach
// return at that moment — so it must be quick, must not keep or modify
// the slices, and must not call the journal. Restarting the driver
// rebuilds the figure from the durable values; there is no unwatching.
// The values are read from the file (see ForEach): if they cannot be, fn
// may have seen some of them, nothing is watched, and the journal reports
// the failure as unhealthy (File.Err) until it is reopened.
func (kv *KV) Watch(fn func(key string, old, new []byte)) {
	if err := kv.j.db.Watch(kv.bucket, fn); err != nil {
		e := fmt.Errorf("%s: watch: %w", kv, err)
		kv.j.watchErr.CompareAndSwap(nil, &e)
	}
}

func checkKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return status.Errorf(codes.InvalidArgument, "journal: KV key of %d bytes: want 1-%d", len(key), MaxKeyLen)
	}
	return nil
}

// String names the space, for logs.
func (kv *KV) String() string { return fmt.Sprintf("KV(%s)", kv.bucket[3:]) }

package idempotency

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/csikit/csikit/internal/kvlog"
)

// MaxKVValue bounds one KV value.
const MaxKVValue = 16 << 20

// KV is a durable key-value space inside a FileJournal's file, for a
// single-node driver's own metadata (volume sizes, attachments, …). Its
// writes join the journal's group commit: a driver whose CreateVolume
// reserves a name, writes its metadata and commits shares flushes with
// every concurrent call instead of paying for a second file. Keys are
// opaque; values are the caller's bytes. Safe for concurrent use.
type KV struct {
	j      *FileJournal
	bucket string
}

// KV returns the key-value space called name (1–64 bytes). Spaces are
// separate from each other and from the journal's own records; a space
// that was never written is empty.
func (j *FileJournal) KV(name string) (*KV, error) {
	if name == "" || len(name) > 64 {
		return nil, status.Errorf(codes.InvalidArgument, "idempotency: KV name %q: want 1-64 bytes", name)
	}
	return &KV{j: j, bucket: "kv/" + name}, nil
}

// Put stores value under key durably (flushed, grouped with concurrent
// writers) before it returns.
func (kv *KV) Put(ctx context.Context, key string, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if len(value) > MaxKVValue {
		return status.Errorf(codes.InvalidArgument, "idempotency: KV value of %d bytes: at most %d", len(value), MaxKVValue)
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	err := kv.j.db.Update(func(tx *kvlog.Tx) error { tx.Put(kv.bucket, key, value); return nil })
	return storageErr("KV put", err)
}

// Delete removes key durably; a missing key is not an error.
func (kv *KV) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	err := kv.j.db.Update(func(tx *kvlog.Tx) error { tx.Delete(kv.bucket, key); return nil })
	return storageErr("KV delete", err)
}

// ForEach calls fn for every key in key order, on one consistent view;
// value is valid only during the call and must not be modified. An error
// from fn stops the walk and is returned. fn must not write to the journal
// (writes wait until ForEach returns).
func (kv *KV) ForEach(fn func(key string, value []byte) error) error {
	return kv.j.db.View(func(r kvlog.Reader) error { return r.ForEach(kv.bucket, fn) })
}

func checkKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return status.Errorf(codes.InvalidArgument, "idempotency: KV key of %d bytes: want 1-%d", len(key), MaxKeyLen)
	}
	return nil
}

// String names the space, for logs.
func (kv *KV) String() string { return fmt.Sprintf("KV(%s)", kv.bucket[3:]) }

package idempotency

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// KV is a durable key-value space inside a FileJournal's file, for a
// single-node driver's own metadata (volume sizes, attachments, …). Its
// writes join the journal's group commit: a driver whose CreateVolume
// reserves a name, writes its metadata and commits shares fsyncs with every
// concurrent call instead of paying for a second file. Keys are opaque;
// values are the caller's bytes. Safe for concurrent use.
type KV struct {
	j      *FileJournal
	bucket []byte
}

// KV returns the key-value space called name (1–64 bytes), creating it on
// first use. Spaces are separate from each other and from the journal's
// own records.
func (j *FileJournal) KV(name string) (*KV, error) {
	if name == "" || len(name) > 64 {
		return nil, status.Errorf(codes.InvalidArgument, "idempotency: KV name %q: want 1-64 bytes", name)
	}
	b := []byte("kv/" + name)
	if err := j.db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(b)
		return err
	}); err != nil {
		return nil, storageErr("create KV space", err)
	}
	return &KV{j: j, bucket: b}, nil
}

// Put stores value under key durably (fsynced, grouped with concurrent
// writers) before it returns.
func (kv *KV) Put(ctx context.Context, key string, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	v := append([]byte(nil), value...)
	err := kv.j.gc.do(func(tx *bolt.Tx) error { return tx.Bucket(kv.bucket).Put([]byte(key), v) })
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
	err := kv.j.gc.do(func(tx *bolt.Tx) error { return tx.Bucket(kv.bucket).Delete([]byte(key)) })
	return storageErr("KV delete", err)
}

// ForEach calls fn for every key in key order, in one read transaction;
// value is valid only during the call. An error from fn stops the walk and
// is returned.
func (kv *KV) ForEach(fn func(key string, value []byte) error) error {
	return kv.j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(kv.bucket).ForEach(func(k, v []byte) error { return fn(string(k), v) })
	})
}

func checkKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return status.Errorf(codes.InvalidArgument, "idempotency: KV key of %d bytes: want 1-%d", len(key), MaxKeyLen)
	}
	return nil
}

// String names the space, for logs.
func (kv *KV) String() string { return fmt.Sprintf("KV(%s)", kv.bucket[3:]) }

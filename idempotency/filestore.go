package idempotency

import (
	"context"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FileJournalOptions configures OpenFileJournal.
type FileJournalOptions struct {
	// LockTimeout bounds the wait for another process that has the file
	// open (the file is locked while open). Default 5s.
	LockTimeout time.Duration
	// Mode is the file's permission bits when it is created. Default 0600.
	Mode os.FileMode
}

// FileJournal is a crash-safe Journal in one file, for single-node drivers.
//
// It is a bbolt database: every change is a copy-on-write transaction that
// is fsynced before the call returns, so after a crash or SIGKILL at any
// instant the file holds either the state before or after each change,
// never a torn one. Concurrent writers share transactions and fsyncs (group
// commit): a lone caller commits at once, callers that arrive during a
// commit are all committed by the next one. Names and IDs are opaque keys
// inside the file, never file names. Only one process may have the file open.
type FileJournal struct {
	db *bolt.DB
	gc *groupCommit
}

var bucketNames = map[Kind][2][]byte{
	KindVolume:        {[]byte("volume/names"), []byte("volume/ids")},
	KindSnapshot:      {[]byte("snapshot/names"), []byte("snapshot/ids")},
	KindGroupSnapshot: {[]byte("group-snapshot/names"), []byte("group-snapshot/ids")},
}

// OpenFileJournal opens or creates the journal file at path. Close it when
// done.
func OpenFileJournal(path string, o FileJournalOptions) (*FileJournal, error) {
	if o.LockTimeout <= 0 {
		o.LockTimeout = 5 * time.Second
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	db, err := bolt.Open(path, o.Mode, &bolt.Options{Timeout: o.LockTimeout})
	if err != nil {
		return nil, fmt.Errorf("idempotency: open journal %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range bucketNames {
			for _, n := range b {
				if _, err := tx.CreateBucketIfNotExists(n); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("idempotency: init journal %s: %w", path, err)
	}
	return &FileJournal{db: db, gc: &groupCommit{db: db}}, nil
}

// Close closes the file. Calls after Close fail.
func (j *FileJournal) Close() error { return j.db.Close() }

// Check verifies the file's internal consistency (page structure) and that
// names and IDs map one to one. It returns the first problem found.
func (j *FileJournal) Check() error {
	return j.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return fmt.Errorf("idempotency: journal corrupt: %w", err)
		}
		for kind, b := range bucketNames {
			names, ids := tx.Bucket(b[0]), tx.Bucket(b[1])
			if names == nil || ids == nil {
				return fmt.Errorf("idempotency: journal lacks %s buckets", kind)
			}
			if nn, ni := names.Stats().KeyN, ids.Stats().KeyN; nn != ni {
				return fmt.Errorf("idempotency: %d %s names but %d IDs", nn, kind, ni)
			}
			err := names.ForEach(func(name, v []byte) error {
				rec, err := decodeRecord(kind, name, v)
				if err != nil {
					return err
				}
				if back := ids.Get([]byte(rec.ID)); string(back) != rec.Name {
					return fmt.Errorf("idempotency: %s name %q → ID %q → name %q", kind, rec.Name, rec.ID, back)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

func storageErr(op string, err error) error {
	if s, ok := status.FromError(err); ok {
		return s.Err()
	}
	return status.Errorf(codes.Internal, "journal %s: %v", op, err)
}

// Reserve implements Journal.
func (j *FileJournal) Reserve(ctx context.Context, r Reservation) (Record, error) {
	if err := checkReservation(ctx, r); err != nil {
		return Record{}, err
	}
	// Fast path: a retry of a known name needs no write.
	if rec, ok, err := j.LookupName(ctx, r.Kind, r.Name); err != nil || ok {
		if err == nil && !sameFingerprint(rec.Fingerprint, r.Fingerprint) {
			err = mismatch(rec)
		}
		return rec, err
	}
	var out Record
	var outErr error
	err := j.gc.do(func(tx *bolt.Tx) error {
		out, outErr = Record{}, nil
		b := bucketNames[r.Kind]
		names, ids := tx.Bucket(b[0]), tx.Bucket(b[1])
		if v := names.Get([]byte(r.Name)); v != nil {
			rec, err := decodeRecord(r.Kind, []byte(r.Name), v)
			if err != nil {
				return err
			}
			out = rec
			if !sameFingerprint(rec.Fingerprint, r.Fingerprint) {
				outErr = mismatch(rec)
			}
			return nil
		}
		if owner := ids.Get([]byte(r.ID)); owner != nil {
			outErr = idTaken(r.Kind, r.ID, string(owner), r.Name)
			return nil
		}
		rec := Record{Kind: r.Kind, Name: r.Name, ID: r.ID, Fingerprint: r.Fingerprint, Reserved: time.Now()}
		if err := names.Put([]byte(r.Name), encodeRecord(rec)); err != nil {
			return err
		}
		if err := ids.Put([]byte(r.ID), []byte(r.Name)); err != nil {
			return err
		}
		out = rec
		return nil
	})
	if err != nil {
		return Record{}, storageErr("reserve", err)
	}
	if outErr != nil {
		return Record{}, outErr
	}
	return out, nil
}

// Commit implements Journal.
func (j *FileJournal) Commit(ctx context.Context, kind Kind, name, id string, response []byte) error {
	if err := checkArgs(ctx, kind, name); err != nil {
		return err
	}
	if err := checkArgs(ctx, kind, id); err != nil {
		return err
	}
	var outErr error
	err := j.gc.do(func(tx *bolt.Tx) error {
		outErr = nil
		b := bucketNames[kind]
		names, ids := tx.Bucket(b[0]), tx.Bucket(b[1])
		v := names.Get([]byte(name))
		if v == nil {
			outErr = noReservation(kind, name)
			return nil
		}
		rec, err := decodeRecord(kind, []byte(name), v)
		if err != nil {
			return err
		}
		if id != rec.ID {
			if owner := ids.Get([]byte(id)); owner != nil && string(owner) != name {
				outErr = idTaken(kind, id, string(owner), name)
				return nil
			}
			if err := ids.Delete([]byte(rec.ID)); err != nil {
				return err
			}
			if err := ids.Put([]byte(id), []byte(name)); err != nil {
				return err
			}
			rec.ID = id
		}
		rec.Committed = true
		rec.Response = response
		return names.Put([]byte(name), encodeRecord(rec))
	})
	if err != nil {
		return storageErr("commit", err)
	}
	return outErr
}

// LookupName implements Journal.
func (j *FileJournal) LookupName(ctx context.Context, kind Kind, name string) (rec Record, ok bool, err error) {
	if err := checkArgs(ctx, kind, name); err != nil {
		return Record{}, false, err
	}
	err = j.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketNames[kind][0]).Get([]byte(name))
		if v == nil {
			return nil
		}
		ok = true
		rec, err = decodeRecord(kind, []byte(name), v)
		return err
	})
	if err != nil {
		return Record{}, false, storageErr("lookup", err)
	}
	return rec, ok, nil
}

// LookupID implements Journal.
func (j *FileJournal) LookupID(ctx context.Context, kind Kind, id string) (rec Record, ok bool, err error) {
	if err := checkArgs(ctx, kind, id); err != nil {
		return Record{}, false, err
	}
	err = j.db.View(func(tx *bolt.Tx) error {
		b := bucketNames[kind]
		name := tx.Bucket(b[1]).Get([]byte(id))
		if name == nil {
			return nil
		}
		v := tx.Bucket(b[0]).Get(name)
		if v == nil {
			return fmt.Errorf("%s ID %q names %q which has no record", kind, id, name)
		}
		ok = true
		rec, err = decodeRecord(kind, name, v)
		return err
	})
	if err != nil {
		return Record{}, false, storageErr("lookup", err)
	}
	return rec, ok, nil
}

// Release implements Journal.
func (j *FileJournal) Release(ctx context.Context, kind Kind, id string) error {
	if _, ok, err := j.LookupID(ctx, kind, id); err != nil || !ok {
		return err // nothing to write
	}
	err := j.gc.do(func(tx *bolt.Tx) error {
		b := bucketNames[kind]
		names, ids := tx.Bucket(b[0]), tx.Bucket(b[1])
		name := ids.Get([]byte(id))
		if name == nil {
			return nil
		}
		name = append([]byte(nil), name...) // Delete invalidates it
		if err := ids.Delete([]byte(id)); err != nil {
			return err
		}
		return names.Delete(name)
	})
	if err != nil {
		return storageErr("release", err)
	}
	return nil
}

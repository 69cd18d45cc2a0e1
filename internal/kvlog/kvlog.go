// Package kvlog is a small crash-safe key-value store: an in-memory map of
// buckets of keys, made durable by an append-only, checksummed log file
// with group commit. It backs idempotency.FileJournal.
//
// Why not a B-tree file (bbolt, which this replaced): a copy-on-write
// B-tree commit needs two ordered flushes (pages, then the meta page),
// while a log append needs one. The file is preallocated with zeros, so an
// append overwrites blocks that already exist and fdatasync has no
// file-system metadata to commit. Concurrent writers share one append and
// one flush.
//
// File layout: a 512-byte header (magic, version, random salt), then
// records, each starting on a 512-byte boundary:
//
//	u32  payload length
//	u64  sequence number (1, 2, …)
//	u32  CRC-32C of salt ‖ length ‖ sequence ‖ payload
//	     payload: ops, each op byte (1 put, 2 delete), then uvarint-prefixed
//	     bucket, key and (puts only) value
//	     zero padding to the next 512-byte boundary
//
// A record is one atomic batch: after a crash the file replays to the state
// after some prefix of the acknowledged batches plus, possibly, the batch
// that was being written. At open, the first record that does not verify
// ends the log; if any verifying record follows it the file is corrupt
// (not merely torn) and Open fails rather than dropping data. The salt
// makes records of another file, or bytes inside a value, unable to pass as
// records of this one. When the log outgrows its live data several times
// over it is rewritten (compacted) into a new file that replaces the old
// one atomically.
//
// The code is in one file per part: kvlog.go (Open, Close, Options),
// file.go (file handling: locking, replay, growth, framing, Verify),
// encoding.go (op encoding), reader.go (View and Reader), commit.go (Tx,
// Update and group commit) and compact.go (compaction).
package kvlog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
	"time"
)

const (
	sector     = 512
	headerSize = sector
	recHeader  = 16
	magic      = "csikit kvlog\x00\x00\x00\x01" // 16 bytes, last byte = version
	saltSize   = 16

	opPut    = 1
	opDelete = 2

	// MaxRecord bounds one batch's payload, and so one value.
	MaxRecord = 64 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// boltMagic is where a bbolt file's first meta page has it (offset 16).
const boltMagic = 0xED0CDAED

// ErrClosed is returned by calls on a closed DB.
var ErrClosed = errors.New("kvlog: closed")

// Options configures Open.
type Options struct {
	// Mode is the file's permission bits when it is created. Default 0600.
	Mode os.FileMode
	// LockTimeout bounds the wait for another process that has the file
	// open. Default 5s.
	LockTimeout time.Duration
	// Grow is how many bytes of zeros are added when the log reaches the
	// end of the file. Default 4 MiB.
	Grow int64
	// CompactAt is the log size below which the file is never compacted.
	// Default 8 MiB. Above it, the file is rewritten when the log is more
	// than four times the size of the live data.
	CompactAt int64
}

// DB is an open store. Reads are served from memory; writes go through
// Update. Safe for concurrent use.
type DB struct {
	path string
	opts Options

	mu    sync.RWMutex // guards state and live
	state map[string]map[string][]byte
	live  int64 // encoded size of the live data, for compaction

	gmu    sync.Mutex // guards the fields below
	queue  []*write
	busy   bool
	idle   *sync.Cond // signalled when busy turns false
	closed bool
	failed error // a write or flush failed: no further writes

	// Owned by the current leader (busy == true).
	f    *os.File
	salt [saltSize]byte
	seq  uint64 // last sequence number written
	end  int64  // offset where the next record goes
	size int64  // file size (all of it zeros beyond end)
}

// Open opens or creates the store at path, replays it, and locks it against
// other processes until Close.
func Open(path string, o Options) (*DB, error) {
	if errUnsupported != nil {
		return nil, errUnsupported
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = 5 * time.Second
	}
	if o.Grow <= 0 {
		o.Grow = 4 << 20
	}
	o.Grow = (o.Grow + sector - 1) / sector * sector
	if o.CompactAt <= 0 {
		o.CompactAt = 8 << 20
	}
	db := &DB{path: path, opts: o, state: map[string]map[string][]byte{}}
	db.idle = sync.NewCond(&db.gmu)

	f, err := openLocked(path, o)
	if err != nil {
		return nil, err
	}
	// A compaction that crashed leaves its unfinished file; holding the
	// lock, nobody else can be compacting.
	_ = os.Remove(path + ".compact")
	db.f = f
	if err := db.load(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return db, nil
}

// Records returns the sequence number of the last durable record: how
// many batches were committed since the file was created or last
// compacted. For tests and metrics.
func (db *DB) Records() uint64 {
	db.gmu.Lock()
	for db.busy {
		db.idle.Wait()
	}
	defer db.gmu.Unlock()
	return db.seq
}

// Close waits for the commit in progress, then closes the file. Later calls
// fail with ErrClosed.
func (db *DB) Close() error {
	db.gmu.Lock()
	if db.closed {
		db.gmu.Unlock()
		return ErrClosed
	}
	db.closed = true
	for db.busy {
		db.idle.Wait()
	}
	db.gmu.Unlock()
	return db.f.Close()
}

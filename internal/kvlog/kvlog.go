// Package kvlog is a small crash-safe key-value store: an in-memory map of
// buckets of keys to where their values are in an append-only, checksummed
// log file with group commit. It backs journal.File. Values are read from
// the file when asked for (from the page cache, as a rule): at 100,000
// hostpath volumes they were 40 MB of a 62 MB heap. The keys are held
// without a pointer per key (see keyset), so the garbage collector does
// not mark them.
//
// Why not a B-tree file (bbolt, which this replaced): a copy-on-write
// B-tree commit needs two ordered flushes (pages, then the meta page),
// while a log append needs one. The file is preallocated with zeros, so an
// append overwrites blocks that already exist and fdatasync has no
// file-system metadata to commit. Concurrent writers share one append and
// one flush.
//
// File layout: a 512-byte header, then records, each starting on a
// 512-byte boundary. The header:
//
//	16 bytes  magic, its last byte the format version (1)
//	16 bytes  random salt
//	u64       snapshot: how many records a compaction wrote (0 if none)
//	u32       CRC-32C of the 40 bytes before it (0 when snapshot is 0)
//
// A record:
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
// records of this one.
//
// When the log outgrows its live data several times over it is rewritten
// (compacted): the live data is written as a stream of records of about
// 1 MiB each into a new file, whose header names how many there are; the
// file is flushed and then renamed over the old one. The copy runs in the
// background: commits go on appending to the old file meanwhile, and
// wait only for the finish, which carries their records over to the new
// file (see compaction); readers never wait for it. A compaction writes
// each bucket's values in key order; a store of many keys is compacted
// also when over a quarter of its values lie out of that order (appended
// since, or in a file never compacted: random keys written one by one
// scatter a page of a listing over the whole file, a read per value), so
// a walk of a run of keys stays a few reads. So no size limit
// applies to the live data as a whole, and a file whose snapshot does not
// replay in full is refused as corrupt rather than opened with part of it.
// A compaction that fails (a full disk, any I/O error) removes its file
// and leaves the old log the store, still taking writes; it is retried
// once the log has grown by another Options.CompactAt.
//
// A failed append or flush poisons the store: what reached the file is
// unknown, so it refuses writes and Err reports why. The next Update after
// Options.RetryAfter tries to recover by rewriting the live data (the
// keys in memory, which are exactly the acknowledged ones, and their
// values, read from the file, where they were flushed before they were
// acknowledged) into a new file, as a compaction does; reopening the file
// recovers too.
//
// Limits: one Update's writes (and so one value) at most MaxRecord bytes
// encoded; an Update over it fails alone with ErrTooLarge. Keys and bucket
// names are bounded only by that. The live data as a whole has no limit
// but memory for its keys and the file's size (2^37 bytes: a value's
// offset and length share 64 bits).
//
// The code is in one file per part: kvlog.go (Open, Close, Options),
// file.go (file handling: locking, replay, growth, framing, Verify),
// encoding.go (op encoding), loc.go (where values are, and reading
// them), reader.go (View and Reader), commit.go (Tx,
// Update and group commit) and compact.go (compaction).
package kvlog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
	"sync/atomic"
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

	// MaxRecord bounds one record's payload: one Update's writes, and so
	// one value.
	MaxRecord = 64 << 20

	// compactChunk is the payload size at which a compaction starts its
	// next record.
	compactChunk = 1 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// boltMagic is where a bbolt file's first meta page has it (offset 16).
const boltMagic = 0xED0CDAED

// ErrClosed is returned by calls on a closed DB.
var ErrClosed = errors.New("kvlog: closed")

// ErrTooLarge is wrapped by the error of an Update whose writes exceed
// MaxRecord.
var ErrTooLarge = errors.New("kvlog: update too large")

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
	// RetryAfter is how long a store poisoned by a failed write refuses
	// writes before the next Update tries to recover it (see Err).
	// Default 1s.
	RetryAfter time.Duration
	// SortAt is the number of keys from which the file is also compacted
	// when more than a quarter of the values lie out of key order
	// (written since the last compaction, or by a file never compacted),
	// so that a walk of a run of keys (a page of a listing) reads a few
	// stretches of the file rather than a value at a time. Default 4096.
	SortAt int
}

// DB is an open store. Keys are in memory, values are read from the file;
// writes go through Update. Safe for concurrent use.
type DB struct {
	path string
	opts Options

	mu      sync.RWMutex       // guards buckets, watches and live
	buckets map[string]*keyset // each bucket's keys, in order, and where their values are
	watches map[string][]func(key string, old, new []byte)
	live    int64 // encoded size of the live data, for compaction
	keys    int   // live keys, all buckets
	// misplaced counts the live values at or after sorted: those not
	// written by the last compaction, so out of key order.
	misplaced int
	sorted    int64 // where the last compaction's records end
	// compactions counts the files compactions made, and carried the
	// records committed during their copies, for tests.
	compactions, carried atomic.Int64

	gmu     sync.Mutex // guards the fields below
	queue   []*write
	busy    bool
	idle    *sync.Cond // signalled when busy turns false
	closed  bool
	failed  error       // a write or flush failed: no writes until recovered
	retryAt time.Time   // when the next Update may try to recover
	running *compaction // the compaction copying in the background, if any

	// Owned by the current leader (busy == true).
	f        *os.File
	salt     [saltSize]byte
	seq      uint64 // last sequence number written
	snapshot uint64 // records the compaction that made the file wrote
	end      int64  // offset where the next record goes
	size     int64  // file size (all of it zeros beyond end)
	// nextCompact: after a failed compaction, the log end below which
	// none is tried again.
	nextCompact int64
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
	if o.RetryAfter <= 0 {
		o.RetryAfter = time.Second
	}
	if o.SortAt <= 0 {
		o.SortAt = 4096
	}
	db := &DB{path: path, opts: o, buckets: map[string]*keyset{}}
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
// many batches were committed since the file was created or, after a
// compaction, that plus the records the compaction wrote. For tests and
// metrics.
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
	// A compaction's copy reads the file: it ends before the file is
	// closed, and writers queued for its finish commit.
	db.dropCompaction()
	db.gmu.Lock()
	for db.busy {
		db.idle.Wait()
	}
	db.gmu.Unlock()
	return db.f.Close()
}

// Err returns nil while the store takes writes. After a write or flush
// failed it returns that failure: what reached the file is then unknown,
// and writes are refused until the store recovers. Every Update after
// Options.RetryAfter tries to, by rewriting the file from memory (which
// holds exactly the acknowledged writes); reopening the file recovers too.
// Reads keep working throughout. After Close, Err returns ErrClosed.
func (db *DB) Err() error {
	db.gmu.Lock()
	defer db.gmu.Unlock()
	if db.closed {
		return ErrClosed
	}
	if db.failed != nil {
		return fmt.Errorf("kvlog: %s: a write failed, writes are refused until the file is rewritten: %w", db.path, db.failed)
	}
	return nil
}

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
package kvlog

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
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

// openLocked opens path and locks it. A compaction in another process may
// replace the file between the open and the lock: then the lock is on a
// file no longer at path, and the open is retried.
func openLocked(path string, o Options) (*os.File, error) {
	deadline := time.Now().Add(o.LockTimeout)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, o.Mode)
		if err != nil {
			return nil, err
		}
		if err := lock(f, time.Until(deadline)); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		held, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if named, err := os.Stat(path); err == nil && os.SameFile(held, named) {
			return f, nil
		}
		f.Close()
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: locked by another process (waited %s)", path, o.LockTimeout)
		}
	}
}

func lock(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := tryLock(f)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errWouldBlock) {
			return fmt.Errorf("lock: %w", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("locked by another process (waited %s)", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// load reads the file: a new (empty) file gets a header; an existing one is
// replayed and its torn tail, if any, zeroed.
func (db *DB) load() error {
	// Mapped, not read: most of the file is preallocated zeros, which
	// would otherwise stay in the heap.
	data, err := mapFile(db.f)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	defer unmap(data)
	if allZero(data) {
		// New, or created by a process that crashed before its header
		// reached the disk.
		return db.initFile(db.f)
	}
	if len(data) >= 20 && binary.LittleEndian.Uint32(data[16:20]) == boltMagic {
		return errors.New("a bbolt file, the journal format of csikit before kvlog: there is no converter; " +
			"move it aside to start an empty journal (creates in flight then get new IDs)")
	}
	if len(data) < headerSize || string(data[:len(magic)-1]) != magic[:len(magic)-1] {
		return errors.New("not a csikit journal file (bad magic)")
	}
	if data[len(magic)-1] != magic[len(magic)-1] {
		return fmt.Errorf("journal file format version %d, want %d", data[len(magic)-1], magic[len(magic)-1])
	}
	copy(db.salt[:], data[len(magic):])
	off := int64(headerSize)
	for {
		payload, seq, next, ok := db.record(data, off)
		if !ok || seq != db.seq+1 {
			break
		}
		if err := db.apply(payload, db.state); err != nil {
			return fmt.Errorf("record %d at offset %d: %w", seq, off, err)
		}
		db.seq, off = seq, next
	}
	// off is the end of the log. Anything that verifies beyond it means a
	// record in the middle was damaged: refuse rather than lose what follows.
	for p := off + sector; p+recHeader <= int64(len(data)); p += sector {
		if _, seq, _, ok := db.record(data, p); ok && seq > db.seq {
			return fmt.Errorf("journal corrupt: record %d at offset %d does not verify but record %d at offset %d does", db.seq+1, off, seq, p)
		}
	}
	db.end, db.size = off, int64(len(data))
	if db.size%sector != 0 {
		db.size = (db.size + sector - 1) / sector * sector
	}
	// Zero what a torn write left behind, so that only zeros follow the log.
	if tail := data[off:]; !allZero(tail) {
		if err := writeZeros(db.f, off, db.size-off); err != nil {
			return fmt.Errorf("clear torn tail: %w", err)
		}
		if err := db.f.Sync(); err != nil {
			return fmt.Errorf("clear torn tail: %w", err)
		}
	}
	db.live = liveSize(db.state)
	return nil
}

// initFile writes a header with a fresh salt and makes it durable, along
// with the file's directory entry.
func (db *DB) initFile(f *os.File) error {
	if _, err := rand.Read(db.salt[:]); err != nil {
		return err
	}
	hdr := make([]byte, headerSize)
	copy(hdr, magic)
	copy(hdr[len(magic):], db.salt[:])
	if _, err := f.WriteAt(hdr, 0); err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	db.seq, db.end, db.size = 0, headerSize, headerSize
	if err := db.grow(f, db.opts.Grow); err != nil {
		return err
	}
	return syncDir(filepath.Dir(db.path))
}

// record parses and verifies the record at off.
func (db *DB) record(data []byte, off int64) (payload []byte, seq uint64, next int64, ok bool) {
	if off+recHeader > int64(len(data)) {
		return nil, 0, 0, false
	}
	h := data[off : off+recHeader]
	n := int64(binary.LittleEndian.Uint32(h[0:4]))
	seq = binary.LittleEndian.Uint64(h[4:12])
	sum := binary.LittleEndian.Uint32(h[12:16])
	if n == 0 || n > MaxRecord || seq == 0 || off+recHeader+n > int64(len(data)) {
		return nil, 0, 0, false
	}
	payload = data[off+recHeader : off+recHeader+n]
	if db.checksum(h[0:12], payload) != sum {
		return nil, 0, 0, false
	}
	return payload, seq, align(off + recHeader + n), true
}

func (db *DB) checksum(lenSeq, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, db.salt[:])
	c = crc32.Update(c, castagnoli, lenSeq)
	return crc32.Update(c, castagnoli, payload)
}

func align(n int64) int64 { return (n + sector - 1) / sector * sector }

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// grow extends the file with zeros so that at least need more bytes fit
// after end, and makes the new size durable.
func (db *DB) grow(f *os.File, need int64) error {
	if db.end+need <= db.size {
		return nil
	}
	add := (db.end + need - db.size + db.opts.Grow - 1) / db.opts.Grow * db.opts.Grow
	if err := writeZeros(f, db.size, add); err != nil {
		return fmt.Errorf("grow: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("grow: %w", err)
	}
	db.size += add
	return nil
}

// writeZeros writes n zero bytes at off, 64 KiB at a time.
func writeZeros(f *os.File, off, n int64) error {
	zeros := make([]byte, min(n, 64<<10))
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := f.WriteAt(zeros[:k], off); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// appendOp encodes one op (see the package comment); v is ignored for a
// delete.
func appendOp(payload []byte, op byte, b, k string, v []byte) []byte {
	payload = append(payload, op)
	payload = binary.AppendUvarint(payload, uint64(len(b)))
	payload = append(payload, b...)
	payload = binary.AppendUvarint(payload, uint64(len(k)))
	payload = append(payload, k...)
	if op == opPut {
		payload = binary.AppendUvarint(payload, uint64(len(v)))
		payload = append(payload, v...)
	}
	return payload
}

// apply replays one payload into state.
func (db *DB) apply(payload []byte, state map[string]map[string][]byte) error {
	for len(payload) > 0 {
		op := payload[0]
		payload = payload[1:]
		var fields [3][]byte
		nf := 2
		if op == opPut {
			nf = 3
		} else if op != opDelete {
			return fmt.Errorf("unknown op %d", op)
		}
		for i := 0; i < nf; i++ {
			l, n := binary.Uvarint(payload)
			if n <= 0 || uint64(len(payload)-n) < l {
				return errors.New("truncated op")
			}
			fields[i] = payload[n : n+int(l)]
			payload = payload[n+int(l):]
		}
		b, k := string(fields[0]), string(fields[1])
		if op == opPut {
			m := state[b]
			if m == nil {
				m = map[string][]byte{}
				state[b] = m
			}
			m[k] = bytes.Clone(fields[2])
		} else {
			delete(state[b], k)
		}
	}
	return nil
}

func liveSize(state map[string]map[string][]byte) int64 {
	var n int64
	for b, m := range state {
		for k, v := range m {
			n += opSize(b, k, v)
		}
	}
	return n
}

func opSize(b, k string, v []byte) int64 {
	return int64(1 + 3*binary.MaxVarintLen32 + len(b) + len(k) + len(v))
}

// Reader reads the committed state.
type Reader struct{ db *DB }

// Get returns the value of key in bucket, or nil. The slice must not be
// modified.
func (r Reader) Get(bucket, key string) []byte { return r.db.state[bucket][key] }

// Len returns the number of keys in bucket.
func (r Reader) Len(bucket string) int { return len(r.db.state[bucket]) }

// ForEach calls fn for every key of bucket in key order. An error from fn
// stops the walk and is returned. fn must not call Update.
func (r Reader) ForEach(bucket string, fn func(key string, value []byte) error) error {
	m := r.db.state[bucket]
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := fn(k, m[k]); err != nil {
			return err
		}
	}
	return nil
}

// Buckets returns the names of the non-empty buckets, sorted.
func (r Reader) Buckets() []string {
	var out []string
	for b, m := range r.db.state {
		if len(m) > 0 {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// View calls fn with the committed state; writes wait until it returns.
func (db *DB) View(fn func(Reader) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return fn(Reader{db})
}

// Tx is one Update function's view: the committed state plus the writes
// of the functions before it in the same batch, plus its own.
type Tx struct {
	db      *DB
	batch   map[string]map[string]*[]byte // earlier functions' writes; nil value = deleted
	own     map[string]map[string]*[]byte
	ownSize int
}

// Get returns the value of key in bucket as this transaction sees it, or
// nil. The slice must not be modified.
func (tx *Tx) Get(bucket, key string) []byte {
	for _, layer := range []map[string]map[string]*[]byte{tx.own, tx.batch} {
		if v, ok := layer[bucket][key]; ok {
			if v == nil {
				return nil
			}
			return *v
		}
	}
	return tx.db.state[bucket][key]
}

// Put sets key in bucket to a copy of value.
func (tx *Tx) Put(bucket, key string, value []byte) {
	v := bytes.Clone(value)
	if v == nil {
		v = []byte{}
	}
	tx.set(bucket, key, &v)
	tx.ownSize += int(opSize(bucket, key, v))
}

// Delete removes key from bucket; a missing key is not an error.
func (tx *Tx) Delete(bucket, key string) {
	tx.set(bucket, key, nil)
	tx.ownSize += int(opSize(bucket, key, nil))
}

func (tx *Tx) set(bucket, key string, v *[]byte) {
	if tx.own == nil {
		tx.own = map[string]map[string]*[]byte{}
	}
	m := tx.own[bucket]
	if m == nil {
		m = map[string]*[]byte{}
		tx.own[bucket] = m
	}
	m[key] = v
}

type write struct {
	fn   func(*Tx) error
	done chan result
}

type result struct {
	err  error
	lead bool // not a result: the receiver is now the leader
}

// Update runs fn and makes its writes durable before returning. Writes of
// functions that run concurrently share one append and one flush: a lone
// caller commits at once, callers that arrive during a commit are all
// committed by the next one. If fn returns an error its writes are
// discarded (not those of other functions in the batch) and Update returns
// that error. fn may be called more than once (it is re-run if its batch
// must be split) and must not call Update or View.
func (db *DB) Update(fn func(*Tx) error) error {
	w := &write{fn: fn, done: make(chan result, 1)}
	db.gmu.Lock()
	if err := db.unusable(); err != nil {
		db.gmu.Unlock()
		return err
	}
	db.queue = append(db.queue, w)
	if db.busy {
		db.gmu.Unlock()
		r := <-w.done
		if !r.lead {
			return r.err
		}
		db.gmu.Lock()
	} else {
		db.busy = true
	}
	// Leader, holding gmu: commit what is queued (w included).
	batch := db.queue
	db.queue = nil
	db.gmu.Unlock()

	db.commit(batch)
	db.handOver()
	return (<-w.done).err
}

// handOver ends the caller's leadership: the first queued writer becomes
// the leader, or, with none queued, the store goes idle.
func (db *DB) handOver() {
	db.gmu.Lock()
	defer db.gmu.Unlock()
	if len(db.queue) > 0 {
		db.queue[0].done <- result{lead: true} // buffered: never blocks
		return
	}
	db.busy = false
	db.idle.Broadcast()
}

func (db *DB) unusable() error {
	if db.closed {
		return ErrClosed
	}
	if db.failed != nil {
		return fmt.Errorf("kvlog: an earlier write failed (%v); reopen the file", db.failed)
	}
	return nil
}

// commit runs batch's functions, appends their writes as one record,
// flushes it and publishes the new state. Called by the leader only.
func (db *DB) commit(batch []*write) {
	// The leader is the only writer of db.state: it reads it unlocked.
	merged := map[string]map[string]*[]byte{}
	size := 0
	errs := make([]error, len(batch))
	for i, w := range batch {
		tx := &Tx{db: db, batch: merged}
		if errs[i] = run(w.fn, tx); errs[i] != nil {
			continue
		}
		if tx.ownSize > MaxRecord {
			errs[i] = fmt.Errorf("kvlog: one update of %d bytes exceeds %d", tx.ownSize, MaxRecord)
			continue
		}
		if size+tx.ownSize > MaxRecord {
			// Too big for one record: the rest goes first into the next.
			db.gmu.Lock()
			db.queue = append(slices.Clone(batch[i:]), db.queue...)
			db.gmu.Unlock()
			batch, errs = batch[:i], errs[:i]
			break
		}
		for b, m := range tx.own {
			dst := merged[b]
			if dst == nil {
				dst = map[string]*[]byte{}
				merged[b] = dst
			}
			for k, v := range m {
				dst[k] = v
			}
		}
		size += tx.ownSize
	}

	var err error
	if len(merged) > 0 {
		err = db.append(merged, size)
	}
	for i, w := range batch {
		if errs[i] == nil {
			errs[i] = err
		}
		w.done <- result{err: errs[i]}
	}
}

// run calls fn, turning a panic into an error: the leader must finish its
// batch, or every later writer would wait forever.
func run(fn func(*Tx) error, tx *Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kvlog: update function panicked: %v", r)
		}
	}()
	return fn(tx)
}

// append writes merged as the next record and, once it is durable, applies
// it to the in-memory state.
func (db *DB) append(merged map[string]map[string]*[]byte, size int) error {
	payload := make([]byte, 0, size)
	var delta int64
	buckets := make([]string, 0, len(merged))
	for b := range merged {
		buckets = append(buckets, b)
	}
	slices.Sort(buckets) // deterministic files, for tests and diffs
	for _, b := range buckets {
		keys := make([]string, 0, len(merged[b]))
		for k := range merged[b] {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := merged[b][k]
			if old, ok := db.state[b][k]; ok {
				delta -= opSize(b, k, old)
			}
			if v == nil {
				payload = appendOp(payload, opDelete, b, k, nil)
			} else {
				payload = appendOp(payload, opPut, b, k, *v)
				delta += opSize(b, k, *v)
			}
		}
	}
	db.gmu.Lock()
	failed := db.failed
	db.gmu.Unlock()
	if failed != nil {
		return fmt.Errorf("kvlog: an earlier write failed (%v); reopen the file", failed)
	}
	if db.end > db.opts.CompactAt && db.end > 4*(db.live+delta)+int64(headerSize) {
		if err := db.compact(); err != nil {
			return db.fail(fmt.Errorf("compact: %w", err))
		}
	}
	rec := db.frame(db.seq+1, payload)
	if err := db.grow(db.f, int64(len(rec))); err != nil {
		return err // nothing of the log was touched: later writes may succeed
	}
	if _, err := db.f.WriteAt(rec, db.end); err != nil {
		return db.fail(err)
	}
	if err := datasync(db.f); err != nil {
		return db.fail(err)
	}
	db.seq++
	db.end += int64(len(rec))

	db.mu.Lock()
	for b, m := range merged {
		dst := db.state[b]
		if dst == nil {
			dst = map[string][]byte{}
			db.state[b] = dst
		}
		for k, v := range m {
			if v == nil {
				delete(dst, k)
			} else {
				dst[k] = *v
			}
		}
	}
	db.live += delta
	db.mu.Unlock()
	return nil
}

// frame returns the record for payload, padded to a sector boundary.
func (db *DB) frame(seq uint64, payload []byte) []byte {
	rec := make([]byte, align(int64(recHeader+len(payload))))
	binary.LittleEndian.PutUint32(rec[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint64(rec[4:12], seq)
	binary.LittleEndian.PutUint32(rec[12:16], db.checksum(rec[0:12], payload))
	copy(rec[recHeader:], payload)
	return rec
}

// fail poisons the store after a write or flush error: what reached the
// disk is unknown (and after a failed fsync the kernel may have dropped the
// dirty pages), so only a reopen, which replays the file, is safe.
func (db *DB) fail(err error) error {
	db.gmu.Lock()
	if db.failed == nil {
		db.failed = err
	}
	db.gmu.Unlock()
	return fmt.Errorf("kvlog: %w", err)
}

// compact rewrites the live state into a new file that atomically replaces
// the old one. Called by the leader only.
func (db *DB) compact() error {
	tmp := db.path + ".compact"
	_ = os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, db.opts.Mode)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	// Lock before the rename, so another process never finds the new file
	// unlocked.
	if err := lock(f, 0); err != nil {
		return err
	}
	oldSalt, oldSeq, oldEnd, oldSize := db.salt, db.seq, db.end, db.size
	restore := func(err error) error {
		db.salt, db.seq, db.end, db.size = oldSalt, oldSeq, oldEnd, oldSize
		return err
	}
	if err := db.initFile(f); err != nil {
		return restore(err)
	}
	var payload []byte
	if err := (Reader{db}).forEachBucket(func(b, k string, v []byte) {
		payload = appendOp(payload, opPut, b, k, v)
	}); err != nil {
		return restore(err)
	}
	if len(payload) > 0 {
		if len(payload) > MaxRecord {
			return restore(fmt.Errorf("live data of %d bytes exceeds %d", len(payload), MaxRecord))
		}
		rec := db.frame(1, payload)
		if err := db.grow(f, int64(len(rec))); err != nil {
			return restore(err)
		}
		if _, err := f.WriteAt(rec, db.end); err != nil {
			return restore(err)
		}
		if err := f.Sync(); err != nil {
			return restore(err)
		}
		db.seq, db.end = 1, db.end+int64(len(rec))
	}
	if err := os.Rename(tmp, db.path); err != nil {
		return restore(err)
	}
	ok = true
	db.f.Close()
	db.f = f
	return syncDir(filepath.Dir(db.path))
}

func (r Reader) forEachBucket(fn func(b, k string, v []byte)) error {
	for _, b := range r.Buckets() {
		if err := r.ForEach(b, func(k string, v []byte) error { fn(b, k, v); return nil }); err != nil {
			return err
		}
	}
	return nil
}

// Verify re-reads the file and checks that it replays to exactly the
// in-memory state.
func (db *DB) Verify() error {
	db.gmu.Lock()
	for db.busy {
		db.idle.Wait()
	}
	db.busy = true
	db.gmu.Unlock()
	defer db.handOver() // writers queued meanwhile wait for a leader
	f, err := os.Open(db.path)
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := mapFile(f)
	if err != nil {
		return err
	}
	defer unmap(data)
	replay := map[string]map[string][]byte{}
	off, seq := int64(headerSize), uint64(0)
	for off < db.end {
		payload, s, next, ok := db.record(data, off)
		if !ok || s != seq+1 {
			return fmt.Errorf("kvlog: record %d at offset %d does not verify", seq+1, off)
		}
		if err := db.apply(payload, replay); err != nil {
			return fmt.Errorf("kvlog: record %d: %w", s, err)
		}
		off, seq = next, s
	}
	if !allZero(data[off:]) {
		return fmt.Errorf("kvlog: non-zero bytes after the log's end at %d", off)
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	for b, m := range db.state {
		for k, v := range m {
			if got, ok := replay[b][k]; !ok || !bytes.Equal(got, v) {
				return fmt.Errorf("kvlog: %s/%q in memory differs from the file", b, k)
			}
		}
		if len(replay[b]) != len(m) {
			return fmt.Errorf("kvlog: bucket %s has %d keys in the file, %d in memory", b, len(replay[b]), len(m))
		}
	}
	for b, m := range replay {
		if len(m) != len(db.state[b]) {
			return fmt.Errorf("kvlog: bucket %s has %d keys in the file, %d in memory", b, len(m), len(db.state[b]))
		}
	}
	return nil
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

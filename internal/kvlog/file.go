package kvlog

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

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
	// Read in pieces through a window, not mapped or read whole: the
	// file's pages never count as the process's memory, and most of the
	// file may be preallocated zeros.
	fi, err := db.f.Stat()
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	w := &window{f: db.f, size: fi.Size()}
	hdr, err := w.at(0, min(headerSize, w.size))
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if allZero(hdr) {
		if zero, err := w.zeroFrom(0); err != nil {
			return fmt.Errorf("read: %w", err)
		} else if zero {
			// New, or created by a process that crashed before its
			// header reached the disk.
			return db.initFile(db.f)
		}
	}
	if len(hdr) >= 20 && binary.LittleEndian.Uint32(hdr[16:20]) == boltMagic {
		return errors.New("a bbolt file, the journal format of csikit before kvlog: there is no converter; " +
			"move it aside to start an empty journal (creates in flight then get new IDs)")
	}
	if db.salt, db.snapshot, err = parseHeader(hdr); err != nil {
		return err
	}
	off := int64(headerSize)
	db.sorted = off
	// Values are only located, and keys copied into blocks the start
	// drops once it has copied the live ones: a value overwritten later in
	// the log is never copied.
	var replayKeys keyArena
	keep := func(k []byte) string { return replayKeys.copy(unsafeString(k)) }
	state := map[string]map[string]loc{}
	for {
		payload, seq, next, ok, err := db.recordAt(w, off)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if !ok || seq != db.seq+1 {
			break
		}
		if err := db.apply(payload, off+recHeader, state, keep); err != nil {
			return fmt.Errorf("record %d at offset %d: %w", seq, off, err)
		}
		db.seq, off = seq, next
		if seq == db.snapshot {
			db.sorted = off
		}
	}
	if db.seq < db.snapshot {
		// Written and flushed before the rename that made it the store,
		// so only damage can shorten it: refuse rather than open a part.
		return fmt.Errorf("journal corrupt: record %d at offset %d does not verify, but the compaction that wrote the file wrote %d", db.seq+1, off, db.snapshot)
	}
	// off is the end of the log. Anything that verifies beyond it means a
	// record in the middle was damaged: refuse rather than lose what follows.
	for p := off + sector; p+recHeader <= w.size; p += sector {
		_, seq, _, ok, err := db.recordAt(w, p)
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if ok && seq > db.seq {
			return fmt.Errorf("journal corrupt: record %d at offset %d does not verify but record %d at offset %d does", db.seq+1, off, seq, p)
		}
	}
	// Copy the live keys, in order, into each bucket's keyset, dropping
	// the replay's copy of a bucket as soon as it is made: at 100,000
	// hostpath volumes the two copies at once raised the start's peak RSS
	// by 25 MB.
	db.live = liveSize(state)
	for b, m := range state {
		delete(state, b)
		if len(m) == 0 {
			continue
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		locs := make([]loc, len(keys))
		misplaced := 0
		for i, k := range keys {
			locs[i] = m[k]
			if locs[i].off() >= db.sorted {
				misplaced++
			}
		}
		db.keys += len(keys)
		db.misplaced += misplaced
		ks := newKeysetSorted(keys, locs)
		ks.misplaced = misplaced
		db.buckets[strings.Clone(b)] = ks
	}
	db.end, db.size = off, w.size
	if db.size%sector != 0 {
		db.size = (db.size + sector - 1) / sector * sector
	}
	// Zero what a torn write left behind, so that only zeros follow the log.
	zero, err := w.zeroFrom(off)
	if err != nil {
		return fmt.Errorf("read: %w", err)
	}
	if !zero {
		if err := writeZeros(db.f, off, db.size-off); err != nil {
			return fmt.Errorf("clear torn tail: %w", err)
		}
		if err := db.f.Sync(); err != nil {
			return fmt.Errorf("clear torn tail: %w", err)
		}
	}
	return nil
}

// recordAt parses and verifies the record at off, read through w; payload
// is valid until w's next read.
func (db *DB) recordAt(w *window, off int64) (payload []byte, seq uint64, next int64, ok bool, err error) {
	h, err := w.at(off, recHeader)
	if h == nil || err != nil {
		return nil, 0, 0, false, err
	}
	n := int64(binary.LittleEndian.Uint32(h[0:4]))
	if n == 0 || n > MaxRecord {
		return nil, 0, 0, false, nil
	}
	rec, err := w.at(off, recHeader+n)
	if rec == nil || err != nil {
		return nil, 0, 0, false, err
	}
	payload, seq, next, ok = db.record(rec, 0)
	return payload, seq, off + next, ok, nil
}

// window reads a file through a buffer of windowSize (or of the largest
// record asked for), for the replay: the file is read once, in order.
type window struct {
	f     *os.File
	size  int64
	buf   []byte
	start int64 // file offset of buf[0]
}

const windowSize = 4 << 20

// at returns the n bytes at off, valid until the next call, or nil if the
// file ends before them.
func (w *window) at(off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off+n > w.size {
		return nil, nil
	}
	if off >= w.start && off+n <= w.start+int64(len(w.buf)) {
		return w.buf[off-w.start : off-w.start+n], nil
	}
	size := min(max(n, windowSize), w.size-off)
	if int64(cap(w.buf)) < size {
		w.buf = make([]byte, size)
	}
	w.buf = w.buf[:size]
	if _, err := w.f.ReadAt(w.buf, off); err != nil {
		w.buf = w.buf[:0]
		return nil, err
	}
	w.start = off
	return w.buf[:n], nil
}

// zeroFrom reports whether the file holds only zeros from off on.
func (w *window) zeroFrom(off int64) (bool, error) {
	for off < w.size {
		b, err := w.at(off, min(windowSize, w.size-off))
		if err != nil {
			return false, err
		}
		if !allZero(b) {
			return false, nil
		}
		off += int64(len(b))
	}
	return true, nil
}

// header returns the file header (see the package comment).
func header(salt *[saltSize]byte, snapshot uint64) []byte {
	hdr := make([]byte, headerSize)
	copy(hdr, magic)
	copy(hdr[len(magic):], salt[:])
	if snapshot > 0 {
		binary.LittleEndian.PutUint64(hdr[32:40], snapshot)
		binary.LittleEndian.PutUint32(hdr[40:44], crc32.Checksum(hdr[:40], castagnoli))
	}
	return hdr
}

// parseHeader checks the header at the start of data and returns its salt
// and snapshot record count.
func parseHeader(data []byte) (salt [saltSize]byte, snapshot uint64, err error) {
	if len(data) < headerSize || string(data[:len(magic)-1]) != magic[:len(magic)-1] {
		return salt, 0, errors.New("not a csikit journal file (bad magic)")
	}
	if data[len(magic)-1] != magic[len(magic)-1] {
		return salt, 0, fmt.Errorf("journal file format version %d, want %d", data[len(magic)-1], magic[len(magic)-1])
	}
	copy(salt[:], data[len(magic):])
	snapshot = binary.LittleEndian.Uint64(data[32:40])
	sum := binary.LittleEndian.Uint32(data[40:44])
	// Both zero in a file no compaction wrote (and in files of csikit
	// before snapshots were counted).
	if (snapshot != 0 || sum != 0) && crc32.Checksum(data[:40], castagnoli) != sum {
		return salt, 0, errors.New("journal corrupt: the file header does not verify")
	}
	return salt, snapshot, nil
}

// initFile writes a header with a fresh salt and makes it durable, along
// with the file's directory entry.
func (db *DB) initFile(f *os.File) error {
	if _, err := rand.Read(db.salt[:]); err != nil {
		return err
	}
	if _, err := f.WriteAt(header(&db.salt, 0), 0); err != nil {
		return fmt.Errorf("write header: %w", err)
	}
	db.seq, db.snapshot, db.end, db.size = 0, 0, headerSize, headerSize
	db.sorted, db.misplaced, db.keys = headerSize, 0, 0
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
	return checksum(&db.salt, lenSeq, payload)
}

// checksum is a record's CRC (see the package comment).
func checksum(salt *[saltSize]byte, lenSeq, payload []byte) uint32 {
	c := crc32.Update(0, castagnoli, salt[:])
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

// placement counts the live keys and those whose values lie at or after
// db.sorted (see DB.misplaced), for Verify; a bucket whose own count is
// wrong is an error. Called with mu held.
func (db *DB) placement() (keys, misplaced int, err error) {
	for b, ks := range db.buckets {
		keys += ks.len()
		n := 0
		ks.all(func(_ string, l loc) {
			if l.off() >= db.sorted {
				n++
			}
		})
		if n != ks.misplaced {
			err = fmt.Errorf("kvlog: bucket %q has %d values out of key order, counted as %d", b, n, ks.misplaced)
		}
		misplaced += n
	}
	return keys, misplaced, err
}

// frame returns the record for payload, padded to a sector boundary.
func (db *DB) frame(seq uint64, payload []byte) []byte {
	return frame(&db.salt, seq, payload)
}

// frame returns the record for payload in a file of salt.
func frame(salt *[saltSize]byte, seq uint64, payload []byte) []byte {
	rec := make([]byte, align(int64(recHeader+len(payload))))
	binary.LittleEndian.PutUint32(rec[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint64(rec[4:12], seq)
	binary.LittleEndian.PutUint32(rec[12:16], checksum(salt, rec[0:12], payload))
	copy(rec[recHeader:], payload)
	return rec
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
	if _, snap, err := parseHeader(data); err != nil {
		return fmt.Errorf("kvlog: %w", err)
	} else if snap != db.snapshot {
		return fmt.Errorf("kvlog: the file's header counts %d snapshot records, memory %d", snap, db.snapshot)
	}
	replay := map[string]map[string]loc{}
	off, seq := int64(headerSize), uint64(0)
	for off < db.end {
		payload, s, next, ok := db.record(data, off)
		if !ok || s != seq+1 {
			return fmt.Errorf("kvlog: record %d at offset %d does not verify", seq+1, off)
		}
		if err := db.apply(payload, off+recHeader, replay, unsafeString); err != nil {
			return fmt.Errorf("kvlog: record %d: %w", s, err)
		}
		off, seq = next, s
	}
	if seq < db.snapshot {
		return fmt.Errorf("kvlog: the log ends at record %d, inside the compacted snapshot of %d", seq, db.snapshot)
	}
	if !allZero(data[off:]) {
		return fmt.Errorf("kvlog: non-zero bytes after the log's end at %d", off)
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	keys, misplaced, err := db.placement()
	if err != nil {
		return err
	}
	if keys != db.keys || misplaced != db.misplaced {
		return fmt.Errorf("kvlog: %d keys, %d of them out of key order, counted as %d and %d", keys, misplaced, db.keys, db.misplaced)
	}
	for b, ks := range db.buckets {
		var bad error
		ks.all(func(k string, l loc) {
			// The same file: the value is the same if it is in the same place.
			if got, ok := replay[b][k]; bad == nil && (!ok || got != l) {
				bad = fmt.Errorf("kvlog: %s/%q in memory differs from the file", b, k)
			}
		})
		if bad != nil {
			return bad
		}
		n := 0
		ks.ascend("", func(k string, l loc) bool {
			n++
			if got, ok := replay[b][k]; !ok || got != l {
				bad = fmt.Errorf("kvlog: %s/%q in the key order differs from the file", b, k)
			}
			return bad == nil
		})
		if bad != nil {
			return bad
		}
		if len(replay[b]) != ks.len() || n != ks.len() {
			return fmt.Errorf("kvlog: bucket %s has %d keys in the file, %d in memory (%d in order)", b, len(replay[b]), ks.len(), n)
		}
	}
	for b, m := range replay {
		if len(m) != db.buckets[b].len() {
			return fmt.Errorf("kvlog: bucket %s has %d keys in the file, %d in memory", b, len(m), db.buckets[b].len())
		}
	}
	return nil
}

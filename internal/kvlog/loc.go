package kvlog

import (
	"fmt"
	"slices"
	"unsafe"
)

// loc is where a value is in the file: its offset shifted left by
// lenBits, ORed with its length. Memory holds the keys and these, not the
// values: at 100,000 hostpath volumes the values were 40 MB of a 62 MB
// heap, which the page cache holds anyway.
type loc uint64

const (
	lenBits = 27 // a value is at most MaxRecord (1<<26) bytes
	maxOff  = 1<<(64-lenBits) - 1
)

func mkloc(off int64, n int) loc { return loc(uint64(off)<<lenBits | uint64(n)) }

func (l loc) off() int64 { return int64(l >> lenBits) }
func (l loc) len() int   { return int(l & (1<<lenBits - 1)) }

// read returns a fresh copy of the value at l. Called with mu held (read
// or write) or by the leader, so that db.f is the file l refers to.
func (db *DB) read(l loc) ([]byte, error) {
	return db.readInto(nil, l)
}

// readInto is read into buf when it has room (a walk's values, each valid
// only during its call, share one buffer).
func (db *DB) readInto(buf []byte, l loc) ([]byte, error) {
	var v []byte
	if buf != nil && cap(buf) >= l.len() {
		v = buf[:l.len()]
	} else {
		v = make([]byte, l.len(), max(l.len(), 512))
	}
	if len(v) == 0 {
		return v, nil
	}
	if _, err := db.f.ReadAt(v, l.off()); err != nil {
		return nil, fmt.Errorf("kvlog: read value at offset %d: %w", l.off(), err)
	}
	return v, nil
}

// keyLoc is one key of a bucket with its value's place, for scans.
type keyLoc struct {
	k string
	l loc
}

// scanWindow is how much of the file a scan reads at once.
const scanWindow = 1 << 20

// scan calls fn for every key of m in the order of their values in the
// file, reading the file in windows of scanWindow rather than a call per
// value: a walk of the whole bucket costs a sequential read of the file.
// v is valid only during the call. Same locking as read.
func (db *DB) scan(ks *keyset, fn func(k string, v []byte) error) error {
	kls := make([]keyLoc, 0, ks.len())
	ks.all(func(k string, l loc) { kls = append(kls, keyLoc{k, l}) })
	slices.SortFunc(kls, func(a, b keyLoc) int {
		return int(a.l.off() - b.l.off())
	})
	var buf []byte
	var start int64 // file offset of buf[0]
	for _, kl := range kls {
		off, n := kl.l.off(), kl.l.len()
		if off < start || off+int64(n) > start+int64(len(buf)) {
			size := max(scanWindow, n)
			if cap(buf) < size {
				buf = make([]byte, size)
			}
			buf = buf[:size]
			got, err := db.f.ReadAt(buf, off)
			if got < n {
				return fmt.Errorf("kvlog: read values at offset %d: %w", off, err)
			}
			buf, start = buf[:got], off
		}
		v := buf[off-start : off-start+int64(n) : off-start+int64(n)]
		if err := fn(kl.k, v); err != nil {
			return err
		}
	}
	return nil
}

// keyArena copies keys into shared blocks at a start: one allocation per
// 64 KiB of keys instead of one per key. The blocks are only ever
// appended to, so the strings never change.
type keyArena struct{ block []byte }

func (a *keyArena) copy(k string) string {
	if len(k) == 0 || len(k) > 1024 {
		return string([]byte(k))
	}
	if cap(a.block)-len(a.block) < len(k) {
		a.block = make([]byte, 0, 64<<10)
	}
	n := len(a.block)
	a.block = append(a.block, k...)
	return unsafe.String(&a.block[n], len(k))
}

package kvlog

import (
	"fmt"
	"os"
	"slices"
	"sync"
)

// Reading a run of keys' values (a page of a listing, a compaction's
// next keys) one read each costs a system call per value. A batchReader
// reads them in offset order instead, one read for each stretch of the
// file where they lie close together: after a compaction, which writes
// the values in key order, a page of keys is one stretch.
type batchReader struct {
	f     *os.File // the file the values are in
	order []int    // indices of the batch's keys in offset order
	buf   []byte
	vals  [][]byte
	kls   []keyLoc // walk's batch, kept with the buffers
}

// batchReaders keeps walks' buffers for the next walk.
var batchReaders = sync.Pool{New: func() any { return new(batchReader) }}

const (
	// batchGap is the widest gap between two values that one read
	// spans rather than making two.
	batchGap = 4 << 10
	// batchBytes bounds the values one batch holds.
	batchBytes = 1 << 20
)

// read returns the values of kls, in kls's order, each a slice of one
// shared buffer valid until the next call. Same locking as DB.read.
func (br *batchReader) read(kls []keyLoc) ([][]byte, error) {
	br.order = br.order[:0]
	for i := range kls {
		br.order = append(br.order, i)
	}
	slices.SortFunc(br.order, func(a, b int) int {
		return int(kls[a].l.off() - kls[b].l.off())
	})
	// Size the buffer: the sum of the stretches' spans.
	total := int64(0)
	for i := 0; i < len(br.order); {
		start, end, j := br.stretch(kls, i)
		total += end - start
		i = j
	}
	if int64(cap(br.buf)) < total {
		br.buf = make([]byte, total)
	}
	br.vals = slices.Grow(br.vals[:0], len(kls))[:len(kls)]
	pos := int64(0)
	for i := 0; i < len(br.order); {
		start, end, j := br.stretch(kls, i)
		b := br.buf[pos : pos+end-start]
		if len(b) > 0 {
			if _, err := br.f.ReadAt(b, start); err != nil {
				return nil, fmt.Errorf("kvlog: read values at offset %d: %w", start, err)
			}
		}
		for _, x := range br.order[i:j] {
			lo := kls[x].l.off() - start
			hi := lo + int64(kls[x].l.len())
			br.vals[x] = b[lo:hi:hi]
		}
		pos += end - start
		i = j
	}
	return br.vals, nil
}

// stretch returns the file range of the values order[i:j] whose reads
// one read covers.
func (br *batchReader) stretch(kls []keyLoc, i int) (start, end int64, j int) {
	l := kls[br.order[i]].l
	start, end = l.off(), l.off()+int64(l.len())
	for j = i + 1; j < len(br.order); j++ {
		l := kls[br.order[j]].l
		if l.off() > end+batchGap {
			break
		}
		end = max(end, l.off()+int64(l.len()))
	}
	return start, end, j
}

// walk calls fn for each key of ks from from on, in key order, with its
// value, reading the values a batch at a time through br: first
// batches of firstBatch keys, so that a short walk reads little beyond
// where it stops, then of batchKeys. An error from fn stops the walk.
func (db *DB) walk(ks *keyset, from string, fn func(k string, v []byte) error) error {
	const firstBatch, batchKeys = 32, 128
	br := batchReaders.Get().(*batchReader)
	br.f = db.f
	kls := br.kls[:0]
	defer func() {
		br.f, br.kls = nil, kls[:0]
		if cap(br.buf) > 4*batchBytes {
			br.buf = nil // a batch of large values: not kept
		}
		clear(br.vals[:cap(br.vals)])
		batchReaders.Put(br)
	}()
	var err error
	size, limit := 0, firstBatch
	flush := func() {
		var vals [][]byte
		if vals, err = br.read(kls); err != nil {
			return
		}
		for i, kl := range kls {
			if err = fn(kl.k, vals[i]); err != nil {
				return
			}
		}
		kls, size, limit = kls[:0], 0, batchKeys
	}
	ks.ascend(from, func(k string, l loc) bool {
		kls = append(kls, keyLoc{k, l})
		if size += l.len(); len(kls) >= limit || size >= batchBytes {
			flush()
		}
		return err == nil
	})
	if err == nil && len(kls) > 0 {
		flush()
	}
	return err
}

package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Record encoding in the file store, version 1:
//
//	byte    version (1)
//	byte    flags (bit 0: committed)
//	varint  reserved, Unix nanoseconds
//	bytes   fingerprint   (uvarint length, then the bytes)
//	bytes   ID
//	bytes   response
//
// The name is the record's key and is not repeated.
const recordVersion = 1

func encodeRecord(r Record) []byte {
	buf := make([]byte, 0, 2+binary.MaxVarintLen64*4+len(r.Fingerprint)+len(r.ID)+len(r.Response))
	var flags byte
	if r.Committed {
		flags |= 1
	}
	buf = append(buf, recordVersion, flags)
	buf = binary.AppendVarint(buf, r.Reserved.UnixNano())
	for _, b := range [][]byte{r.Fingerprint, []byte(r.ID), r.Response} {
		buf = binary.AppendUvarint(buf, uint64(len(b)))
		buf = append(buf, b...)
	}
	return buf
}

var errShortRecord = errors.New("truncated record")

func decodeRecord(kind Kind, name, v []byte) (Record, error) {
	bad := func(err error) (Record, error) {
		return Record{}, fmt.Errorf("%s record %q: %w", kind, name, err)
	}
	if len(v) < 2 {
		return bad(errShortRecord)
	}
	if v[0] != recordVersion {
		return bad(fmt.Errorf("got version %d, want %d", v[0], recordVersion))
	}
	rec := Record{Kind: kind, Name: string(name), Committed: v[1]&1 != 0}
	v = v[2:]
	ns, n := binary.Varint(v)
	if n <= 0 {
		return bad(errShortRecord)
	}
	rec.Reserved = time.Unix(0, ns)
	v = v[n:]
	var fields [3][]byte
	for i := range fields {
		l, n := binary.Uvarint(v)
		if n <= 0 || uint64(len(v)-n) < l {
			return bad(errShortRecord)
		}
		// Copy: the store's memory is valid only during the read.
		fields[i] = append([]byte(nil), v[n:n+int(l)]...)
		v = v[n+int(l):]
	}
	if len(v) != 0 {
		return bad(fmt.Errorf("%d trailing bytes", len(v)))
	}
	rec.Fingerprint, rec.ID, rec.Response = fields[0], string(fields[1]), fields[2]
	if rec.ID == "" {
		return bad(errors.New("empty ID"))
	}
	if len(rec.Response) == 0 {
		rec.Response = nil
	}
	if len(rec.Fingerprint) == 0 {
		rec.Fingerprint = nil
	}
	return rec, nil
}

package kvlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"
)

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

// apply replays one payload, found at offset base of the file, into
// state: each put's key maps to where its value is in the file. keep
// turns a put's key into the string state holds: a copy, or unsafeString
// when payload outlives state's use of it.
func (db *DB) apply(payload []byte, base int64, state map[string]map[string]loc, keep func([]byte) string) error {
	p := payload
	for len(p) > 0 {
		op := p[0]
		p = p[1:]
		var fields [3][]byte
		nf := 2
		if op == opPut {
			nf = 3
		} else if op != opDelete {
			return fmt.Errorf("unknown op %d", op)
		}
		for i := 0; i < nf; i++ {
			l, n := binary.Uvarint(p)
			if n <= 0 || uint64(len(p)-n) < l {
				return errors.New("truncated op")
			}
			fields[i] = p[n : n+int(l)]
			p = p[n+int(l):]
		}
		m := state[string(fields[0])]
		if op == opPut {
			if m == nil {
				m = map[string]loc{}
				state[string(fields[0])] = m
			}
			at := base + int64(len(payload)-len(p)-len(fields[2]))
			m[keep(fields[1])] = mkloc(at, len(fields[2]))
		} else {
			delete(m, string(fields[1]))
		}
	}
	return nil
}

func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func liveSize(state map[string]map[string]loc) int64 {
	var n int64
	for b, m := range state {
		for k, l := range m {
			n += opSize(b, k, l.len())
		}
	}
	return n
}

// opSize bounds the encoded size of a put of a value of vlen bytes.
func opSize(b, k string, vlen int) int64 {
	return int64(1 + 3*binary.MaxVarintLen32 + len(b) + len(k) + vlen)
}

package kvlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
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

// apply replays one payload into state. Values are copied, unless alias:
// then they point into payload, which must outlive state's use of them.
func (db *DB) apply(payload []byte, state map[string]map[string][]byte, alias bool) error {
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
			if alias {
				m[k] = fields[2]
			} else {
				m[k] = bytes.Clone(fields[2])
			}
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
